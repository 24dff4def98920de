package conf

import (
	"errors"
	"fmt"
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
}

// varPrefixes are the families of variables named after a header, argument or cookie.
var varPrefixes = []struct {
	prefix string
	kind   VarKind
}{{"http_", VarHeader}, {"arg_", VarArg}, {"cookie_", VarCookie}}

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
	return strings.Join(names, ", ")
}()

// ErrUnknownVar is what ParseVar's error wraps when gw does not know the name (as
// opposed to knowing a variable it cannot read, like post_arg.*).
var ErrUnknownVar = errors.New("conf: unknown variable")

// Var is one variable, parsed. It is a small value, comparable, safe to copy and share.
// The zero Var names no variable and never has a value.
type Var struct {
	Kind VarKind
	// Name is, for VarHeader, the header name nginx's $http_* reads, '_' read as '-', in
	// the canonical form HTTP libraries store header names in ("X-Api-Key" for
	// http_x_api_key), so that a lookup needs no normalising copy; for VarArg and
	// VarCookie the argument or cookie name, case kept; empty for the other kinds. It is
	// a string, not []byte, so that a Var compares with == and fasthttp's lookups take it
	// without a conversion.
	Name string
}

// ParseVar reads a variable name ("uri", "http_x_user", "arg_page") into a Var. The
// error names the variable and lists the supported ones.
func ParseVar(name string) (Var, error) {
	if kind, ok := varsByName[name]; ok {
		return Var{Kind: kind}, nil
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
	if strings.HasPrefix(name, "post_arg.") || strings.HasPrefix(name, "post_arg_") {
		// APISIX reads these from the request body, which gw streams to the upstream
		// unread.
		return Var{}, fmt.Errorf("variable %q is not supported: gw does not read request bodies", name)
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
