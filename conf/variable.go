package conf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Variables are nginx's and APISIX's request variables ($uri, $arg_page, $route_id...),
// which route vars, chash keys, proxy-rewrite templates and limit-count keys name. They
// are parsed here, once, into a Var when the object is validated, from the one list
// below; gw/plugins/vars reads a Var's value per request. A variable gw cannot read is
// refused wherever it is named, so that a typo fails at write time instead of never
// matching or silently reading as empty.

// VarKind names where a variable's value comes from. The zero VarKind is no variable.
type VarKind uint8

// The variables, named as nginx and APISIX name them.
const (
	VarURI           VarKind = iota + 1 // uri: the normalised, decoded path
	VarRequestURI                       // request_uri: the path and query as sent
	VarArgs                             // args, query_string: the raw query string
	VarHost                             // host: the Host, lower-cased, without the port
	VarRemoteAddr                       // remote_addr: the client's address
	VarRemotePort                       // remote_port
	VarServerAddr                       // server_addr: the local address of the connection
	VarServerPort                       // server_port
	VarRequestMethod                    // request_method
	VarScheme                           // scheme: http or https
	VarHeader                           // http_<name>: a request header
	VarArg                              // arg_<name>: a query argument, decoded
	VarCookie                           // cookie_<name>: a cookie
	VarServerName                       // server_name: "_", APISIX's nginx server_name
	VarHostname                         // hostname: the machine's host name
	VarRouteID                          // route_id: the matched route's id
	VarRouteName                        // route_name
	VarServiceID                        // service_id: the matched route's service
	VarServiceName                      // service_name
	VarConsumerName                     // consumer_name: the authenticated consumer
	VarMQTTClientID                     // mqtt_client_id: a stream-proxy variable, never set over HTTP
	VarPostArg                          // post_arg.<path>: a field of a JSON, urlencoded or multipart body
	VarPostArgForm                      // post_arg_<name>: a field of an urlencoded body
	VarTimeISO8601                      // time_iso8601: local time, nginx's ISO 8601 form (the loggers' default log_format)
	// The response variables, read by ParseResponseVar alone: they have a value only
	// once there is a response (response-rewrite's vars).
	VarStatus     // status: the response's status code
	VarSentHeader // sent_http_<name>: a header of the response, as it stands

	varKindEnd // one past the last kind
)

// namedVars is the list of the variables read by name alone. Together with varPrefixes
// it is every variable gw supports; the top README's "Variables" lists the same.
var namedVars = []struct {
	name string
	kind VarKind
}{
	{"uri", VarURI}, {"request_uri", VarRequestURI}, {"args", VarArgs}, {"query_string", VarArgs},
	{"host", VarHost}, {"hostname", VarHostname}, {"server_name", VarServerName},
	{"remote_addr", VarRemoteAddr}, {"remote_port", VarRemotePort},
	{"server_addr", VarServerAddr}, {"server_port", VarServerPort},
	{"request_method", VarRequestMethod}, {"scheme", VarScheme},
	{"route_id", VarRouteID}, {"route_name", VarRouteName},
	{"service_id", VarServiceID}, {"service_name", VarServiceName},
	{"consumer_name", VarConsumerName}, {"mqtt_client_id", VarMQTTClientID},
	{"time_iso8601", VarTimeISO8601},
}

// varPrefixes are the families of variables named after a header, argument, cookie or
// body field. post_arg.<path> is apart: its name is a path, which ParseVar checks.
var varPrefixes = []struct {
	prefix string
	kind   VarKind
}{{"http_", VarHeader}, {"arg_", VarArg}, {"cookie_", VarCookie}, {"post_arg_", VarPostArgForm}}

// postArgPrefix starts the variables that name a field of the request body by a path.
const postArgPrefix = "post_arg."

var varsByName = func() map[string]VarKind {
	m := make(map[string]VarKind, len(namedVars))
	for _, v := range namedVars {
		m[v.name] = v.kind
	}
	return m
}()

// supportedVars is the list for error messages: "uri, request_uri, ..., cookie_<name>".
var supportedVars = func() string {
	names := make([]string, 0, len(namedVars)+len(varPrefixes))
	for _, v := range namedVars {
		names = append(names, v.name)
	}
	for _, p := range varPrefixes {
		names = append(names, p.prefix+"<name>")
	}
	names = append(names, postArgPrefix+"<path>")
	return strings.Join(names, ", ")
}()

// responseVarStatus and responseHeaderPrefix name the response variables (nginx's
// $status and $sent_http_<name>), which only a reader of the response may name: a route's
// vars, a key or a template are read before there is one, and would never see a value.
const (
	responseVarStatus    = "status"
	responseHeaderPrefix = "sent_http_"
)

// ParseResponseVar is ParseVar for an expression read once the response is known
// (response-rewrite's vars): it also takes status and sent_http_<name>.
func ParseResponseVar(name string) (Var, error) { return parseVar(name, true) }

// ErrUnknownVar is what ParseVar's error wraps when gw does not know the name (as
// opposed to knowing the name and finding it malformed, like post_arg.a[).
var ErrUnknownVar = errors.New("conf: unknown variable")

// Var is one variable, parsed. It is a small value, comparable, safe to copy and share.
// The zero Var names no variable and never has a value.
type Var struct {
	Kind VarKind
	// Name is, for VarHeader, the header name nginx's $http_* reads, '_' read as '-', in
	// the canonical form HTTP libraries store header names in ("X-Api-Key" for
	// http_x_api_key), so that a lookup needs no normalising copy; for VarArg and
	// VarCookie and VarPostArgForm the argument, cookie or field name, case kept; for
	// VarPostArg the path as written, which ParseVar has checked and NextPathStep
	// reads; empty for the other kinds. It is a string, not []byte, so that a Var compares
	// with == and fasthttp's lookups take it without a conversion.
	Name string
}

// ParseVar reads a variable name ("uri", "http_x_user", "arg_page",
// "post_arg.messages[*].role") into a Var. The error names the variable and lists the
// supported ones, or says what is wrong in a post_arg path.
func ParseVar(name string) (Var, error) { return parseVar(name, false) }

func parseVar(name string, response bool) (Var, error) {
	isResponseVar := name == responseVarStatus || strings.HasPrefix(name, responseHeaderPrefix)
	switch {
	case isResponseVar && !response:
		return Var{}, &unknownVarError{fmt.Sprintf("variable %q is the response's: only response-rewrite's vars can read it; supported here: %s", name, supportedVars)}
	case name == responseVarStatus:
		return Var{Kind: VarStatus}, nil
	case isResponseVar:
		rest := name[len(responseHeaderPrefix):]
		if rest == "" {
			return Var{}, &unknownVarError{fmt.Sprintf("invalid variable %q: the name after %q is missing", name, responseHeaderPrefix)}
		}
		return Var{Kind: VarSentHeader, Name: canonicalHeader(rest)}, nil
	}
	if kind, ok := varsByName[name]; ok {
		return Var{Kind: kind}, nil
	}
	if path, found := strings.CutPrefix(name, postArgPrefix); found {
		if err := checkPath(path); err != nil {
			return Var{}, fmt.Errorf("invalid variable %q: %v", name, err)
		}
		return Var{Kind: VarPostArg, Name: path}, nil
	}
	for _, p := range varPrefixes {
		rest, found := strings.CutPrefix(name, p.prefix)
		if !found {
			continue
		}
		if rest == "" {
			return Var{}, &unknownVarError{fmt.Sprintf("invalid variable %q: the name after %q is missing", name, p.prefix)}
		}
		if p.kind == VarHeader {
			rest = canonicalHeader(rest)
		}
		return Var{Kind: p.kind, Name: rest}, nil
	}
	if response {
		return Var{}, &unknownVarError{fmt.Sprintf("unknown variable %q; supported: %s, %s, %s<name>", name, supportedVars, responseVarStatus, responseHeaderPrefix)}
	}
	return Var{}, &unknownVarError{fmt.Sprintf("unknown variable %q; supported: %s", name, supportedVars)}
}

// unknownVarError is ParseVar's error for a name gw does not know; it is ErrUnknownVar
// to errors.Is.
type unknownVarError struct{ msg string }

func (e *unknownVarError) Error() string { return e.msg }

func (e *unknownVarError) Is(target error) bool { return target == ErrUnknownVar }

// String is the variable's name as ParseVar reads it back: "uri", "http_x_api_key";
// "query_string" reads as "args". The zero Var is "".
func (v Var) String() string {
	switch v.Kind {
	case VarPostArg:
		return postArgPrefix + v.Name
	case VarStatus:
		return responseVarStatus
	case VarSentHeader:
		return responseHeaderPrefix + nginxHeader(v.Name)
	}
	for _, p := range varPrefixes {
		if p.kind == v.Kind {
			if v.Kind == VarHeader {
				return p.prefix + nginxHeader(v.Name)
			}
			return p.prefix + v.Name
		}
	}
	for _, n := range namedVars {
		if n.kind == v.Kind {
			return n.name
		}
	}
	return ""
}

// canonicalHeader writes a header name of $http_<name> as net/textproto and fasthttp
// store names: '_' as '-', upper case at the start and after each '-', lower case
// elsewhere ("x_api_KEY" is "X-Api-Key"). Bytes outside ASCII letters are kept.
func canonicalHeader(name string) string {
	b := []byte(name)
	upper := true
	for i, c := range b {
		switch {
		case c == '_' || c == '-':
			b[i], upper = '-', true
			continue
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
		upper = false
	}
	return string(b)
}

// nginxHeader is canonicalHeader undone: "X-Api-Key" is "x_api_key".
func nginxHeader(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// known reports whether k is one of the kinds above.
func (k VarKind) known() bool { return k > 0 && k < varKindEnd }

// A post_arg path is the part of APISIX's JSONPath (lua-jsonpath, "$." and the path) that
// names fields and array items:
//
//	model                 the body's field "model"
//	model.name            a field of that field
//	messages[0].role      an array item, counted from 0; [-1] is the last
//	messages[*].role      every item of the array; .* is every field of an object
//	['a.b'] or ["a.b"]    a field whose name holds a byte a dotted name cannot
//
// The rest of JSONPath (recursive descent "..", slices, unions, filters and scripts) is
// refused, and so is anything else a path cannot be: an empty name, an unclosed bracket.

// PathStep is one step of a post_arg path.
type PathStep struct {
	Kind StepKind
	// Name is a StepName's field name.
	Name string
	// Index is a StepIndex's item number; a negative one counts from the end.
	Index int
}

// StepKind says what a PathStep selects.
type StepKind uint8

// The kinds of PathStep.
const (
	StepName  StepKind = iota + 1 // a field of an object
	StepIndex                     // an item of an array
	StepAll                       // every item of an array, or every field of an object
)

// maxPathIndex bounds an index's digits so that it fits an int everywhere.
const maxPathIndex = 999_999_999

// NextPathStep reads the first step off a path ParseVar has checked (Var.Name of a
// VarPostArg), returning the rest of the path; ok is false once the path is used up. It
// allocates nothing, so that gw/plugins/vars walks a path per request without a parsed
// copy of it.
func NextPathStep(path string) (step PathStep, rest string, ok bool) {
	// A path's first step starts with a name or '['; every later one with '.' or '['.
	offset := 0
	if path != "" && path[0] == '.' {
		offset = 1
	}
	step, rest, err := readPathStep(path, offset)
	if err != nil || step.Kind == 0 {
		return PathStep{}, "", false
	}
	return step, rest, true
}

// checkPath reports what is wrong with a post_arg path, if anything.
func checkPath(path string) error {
	if path == "" {
		return fmt.Errorf("the path after %q is missing", postArgPrefix)
	}
	for offset := 0; ; {
		step, rest, err := readPathStep(path[offset:], offset)
		if err != nil {
			return err
		}
		if step.Kind == 0 {
			return nil
		}
		offset = len(path) - len(rest)
	}
}

// readPathStep reads one step off path, which starts at offset of the whole path (for
// error messages). The zero step, with no error, is the end of the path.
func readPathStep(path string, offset int) (PathStep, string, error) {
	if path == "" {
		return PathStep{}, "", nil
	}
	first := offset == 0
	switch c := path[0]; {
	case c == '[':
		return readBracket(path, offset)
	case c == '.' && first:
		return PathStep{}, "", fmt.Errorf("the path starts with '.': write the first name without it")
	case c == '.':
		path, offset = path[1:], offset+1
		if path == "" {
			return PathStep{}, "", fmt.Errorf("a name is missing after the '.' at offset %d", offset-1)
		}
		if path[0] == '.' {
			return PathStep{}, "", fmt.Errorf("recursive descent (\"..\") at offset %d is not supported: name each step", offset-1)
		}
		if path[0] == '[' {
			return PathStep{}, "", fmt.Errorf("a name is missing between the '.' and the '[' at offset %d", offset)
		}
	case !first:
		return PathStep{}, "", fmt.Errorf("unexpected %q at offset %d: a step starts with '.' or '['", c, offset)
	}
	if path[0] == '*' {
		return PathStep{Kind: StepAll}, path[1:], nil
	}
	end := 0
	for end < len(path) && isPathNameByte(path[end]) {
		end++
	}
	if end == 0 {
		return PathStep{}, "", fmt.Errorf("unexpected %q at offset %d: a name, '*' or '[' must come here", path[0], offset)
	}
	return PathStep{Kind: StepName, Name: path[:end]}, path[end:], nil
}

// readBracket reads a step in brackets: [N], [*], ['name'] or ["name"].
func readBracket(path string, offset int) (PathStep, string, error) {
	inner := path[1:]
	if len(inner) > 0 && (inner[0] == '\'' || inner[0] == '"') {
		closing := strings.IndexByte(inner[1:], inner[0])
		if closing < 0 {
			return PathStep{}, "", fmt.Errorf("the quote at offset %d is not closed", offset+1)
		}
		name, after := inner[1:1+closing], inner[2+closing:]
		if !strings.HasPrefix(after, "]") {
			return PathStep{}, "", fmt.Errorf("the '[' at offset %d is not closed after its quoted name", offset)
		}
		if name == "" {
			return PathStep{}, "", fmt.Errorf("the quoted name at offset %d is empty", offset+1)
		}
		return PathStep{Kind: StepName, Name: name}, after[1:], nil
	}
	closing := strings.IndexByte(inner, ']')
	if closing < 0 || strings.IndexByte(inner[:closing], '[') >= 0 {
		return PathStep{}, "", fmt.Errorf("the '[' at offset %d is not closed", offset)
	}
	inside, rest := inner[:closing], inner[closing+1:]
	switch {
	case inside == "*":
		return PathStep{Kind: StepAll}, rest, nil
	case inside == "":
		return PathStep{}, "", fmt.Errorf("the brackets at offset %d are empty: write an index, '*' or a quoted name", offset)
	case strings.HasPrefix(inside, "?") || strings.HasPrefix(inside, "("):
		return PathStep{}, "", fmt.Errorf("JSONPath filters and scripts (%q at offset %d) are not supported", "["+inside+"]", offset)
	case strings.ContainsAny(inside, ":,"):
		return PathStep{}, "", fmt.Errorf("JSONPath slices and unions (%q at offset %d) are not supported: write one index or '*'", "["+inside+"]", offset)
	}
	digits := strings.TrimPrefix(inside, "-")
	n, err := strconv.Atoi(inside)
	if err != nil || !isDigits(digits) || n > maxPathIndex || n < -maxPathIndex {
		return PathStep{}, "", fmt.Errorf("%q at offset %d is not an index: write a whole number up to %d, '*' or a quoted name", "["+inside+"]", offset, maxPathIndex)
	}
	return PathStep{Kind: StepIndex, Index: n}, rest, nil
}

// isPathNameByte reports whether c may be in a dotted name: any byte but white space,
// control bytes and the ones JSONPath gives a meaning to.
func isPathNameByte(c byte) bool {
	if c <= ' ' || c == 0x7f {
		return false
	}
	return strings.IndexByte(".[]*'\"()?@$,:", c) < 0
}
