package conf

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseVarAccepts(t *testing.T) {
	tests := []struct {
		name string
		want Var
	}{
		{"uri", Var{Kind: VarURI}},
		{"request_uri", Var{Kind: VarRequestURI}},
		{"args", Var{Kind: VarArgs}},
		{"query_string", Var{Kind: VarArgs}},
		{"host", Var{Kind: VarHost}},
		{"hostname", Var{Kind: VarHostname}},
		{"server_name", Var{Kind: VarServerName}},
		{"remote_addr", Var{Kind: VarRemoteAddr}},
		{"remote_port", Var{Kind: VarRemotePort}},
		{"server_addr", Var{Kind: VarServerAddr}},
		{"server_port", Var{Kind: VarServerPort}},
		{"request_method", Var{Kind: VarRequestMethod}},
		{"scheme", Var{Kind: VarScheme}},
		{"route_id", Var{Kind: VarRouteID}},
		{"route_name", Var{Kind: VarRouteName}},
		{"service_id", Var{Kind: VarServiceID}},
		{"service_name", Var{Kind: VarServiceName}},
		{"consumer_name", Var{Kind: VarConsumerName}},
		{"mqtt_client_id", Var{Kind: VarMQTTClientID}},
		{"time_iso8601", Var{Kind: VarTimeISO8601}},
		// nginx matches $http_* case-insensitively, '_' for '-'; the name is kept as HTTP
		// libraries store it.
		{"http_x_api_key", Var{Kind: VarHeader, Name: "X-Api-Key"}},
		{"http_X_Api_Key", Var{Kind: VarHeader, Name: "X-Api-Key"}},
		{"http_x-api-key", Var{Kind: VarHeader, Name: "X-Api-Key"}},
		{"http_host", Var{Kind: VarHeader, Name: "Host"}},
		{"http_CONTENT_TYPE", Var{Kind: VarHeader, Name: "Content-Type"}},
		{"http_x__y", Var{Kind: VarHeader, Name: "X--Y"}},
		{"http_x1_2a", Var{Kind: VarHeader, Name: "X1-2a"}},
		// Arguments and cookies keep their case, as APISIX's get_uri_args and cookies do.
		{"arg_Page_No", Var{Kind: VarArg, Name: "Page_No"}},
		{"arg_a.b", Var{Kind: VarArg, Name: "a.b"}},
		{"cookie_Sess-ID", Var{Kind: VarCookie, Name: "Sess-ID"}},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		got, err := ParseVar(tt.name)
		if err != nil || got != tt.want {
			t.Errorf("ParseVar(%q) = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
		covered[tt.name] = true
	}
	for _, v := range namedVars {
		if !covered[v.name] {
			t.Errorf("variable %q is supported but not in this table", v.name)
		}
	}
}

func TestParseVarRejects(t *testing.T) {
	tests := []struct {
		name, want string
		unknown    bool // errors.Is(err, ErrUnknownVar)
	}{
		{"", `unknown variable ""; supported: uri, request_uri, args, query_string, host, hostname, server_name, ` +
			`remote_addr, remote_port, server_addr, server_port, request_method, scheme, route_id, route_name, ` +
			`service_id, service_name, consumer_name, mqtt_client_id, time_iso8601, http_<name>, arg_<name>, cookie_<name>, ` +
			`post_arg_<name>, post_arg.<path>`, true},
		{"foo", `unknown variable "foo"; supported: uri,`, true},
		{"URI", `unknown variable "URI"`, true}, // nginx's names are case-sensitive
		{" uri", `unknown variable " uri"`, true},
		{"$uri", `unknown variable "$uri"`, true},
		{"uri.b", `unknown variable "uri.b"`, true},
		{"upstream_addr", `unknown variable "upstream_addr"`, true},
		{"request_body", `unknown variable "request_body"`, true},
		{"uri_param_id", `unknown variable "uri_param_id"`, true},
		{"graphql_name", `unknown variable "graphql_name"`, true},
		{"HTTP_X", `unknown variable "HTTP_X"`, true},
		{"http_", `invalid variable "http_": the name after "http_" is missing`, true},
		{"arg_", `invalid variable "arg_": the name after "arg_" is missing`, true},
		{"cookie_", `invalid variable "cookie_": the name after "cookie_" is missing`, true},
		{"post_arg_", `invalid variable "post_arg_": the name after "post_arg_" is missing`, true},
		{"post_arg", `unknown variable "post_arg"`, true},
		{"post_arg.", `invalid variable "post_arg.": the path after "post_arg." is missing`, false},
	}
	for _, tt := range tests {
		v, err := ParseVar(tt.name)
		if err == nil {
			t.Errorf("ParseVar(%q) = %+v, want an error", tt.name, v)
			continue
		}
		if !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ParseVar(%q) error = %q, want it to start with %q", tt.name, err, tt.want)
		}
		if got := errors.Is(err, ErrUnknownVar); got != tt.unknown {
			t.Errorf("ParseVar(%q): errors.Is(err, ErrUnknownVar) = %v, want %v", tt.name, got, tt.unknown)
		}
	}
}

func TestVarString(t *testing.T) {
	for _, tt := range []struct {
		v    Var
		want string
	}{
		{Var{Kind: VarURI}, "uri"},
		{Var{Kind: VarArgs}, "args"},
		{Var{Kind: VarConsumerName}, "consumer_name"},
		{Var{Kind: VarHeader, Name: "X-Api-Key"}, "http_x_api_key"},
		{Var{Kind: VarArg, Name: "Page-No"}, "arg_Page-No"},
		{Var{Kind: VarCookie, Name: "sid"}, "cookie_sid"},
		{Var{}, ""},
	} {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// The top README lists the supported variables once, for every feature that names one;
// it must list exactly these.
func TestREADMEListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "\n### Variables\n")
	if !found {
		t.Fatal(`README.md has no "### Variables" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	for _, v := range namedVars {
		if !strings.Contains(section, "`"+v.name+"`") {
			t.Errorf("README.md's Variables section does not list `%s`", v.name)
		}
	}
	for _, p := range varPrefixes {
		if !strings.Contains(section, "`"+p.prefix+"<name>`") {
			t.Errorf("README.md's Variables section does not list `%s<name>`", p.prefix)
		}
	}
}

// FuzzParseVar: any name is a known variable that String names back, or an error that
// quotes the name; nothing panics.
func FuzzParseVar(f *testing.F) {
	for _, seed := range []string{"uri", "http_X_Y", "arg_", "cookie_a=b", "post_arg.x", "foo", "", "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v, err := ParseVar(name)
		if err != nil {
			if v != (Var{}) {
				t.Fatalf("ParseVar(%q) = %+v with error %v", name, v, err)
			}
			return
		}
		if !v.Kind.known() {
			t.Fatalf("ParseVar(%q) = kind %d", name, v.Kind)
		}
		again, err := ParseVar(v.String())
		if err != nil || again != v {
			t.Fatalf("ParseVar(%q) = %+v, but its String %q reads back as %+v, %v", name, v, v.String(), again, err)
		}
	})
}

// post_arg paths: APISIX checks them with lua-jsonpath at write time
// (t/admin/routes_request_body.t TEST 10: "messages[.content[*].type" is a 400).
func TestParsePostArgPath(t *testing.T) {
	accepts := map[string][]PathStep{
		"model":                       {{Kind: StepName, Name: "model"}},
		"model.name":                  {{Kind: StepName, Name: "model"}, {Kind: StepName, Name: "name"}},
		"messages[*].content[*].type": {{Kind: StepName, Name: "messages"}, {Kind: StepAll}, {Kind: StepName, Name: "content"}, {Kind: StepAll}, {Kind: StepName, Name: "type"}},
		"messages[0].role":            {{Kind: StepName, Name: "messages"}, {Kind: StepIndex, Index: 0}, {Kind: StepName, Name: "role"}},
		"messages[-1]":                {{Kind: StepName, Name: "messages"}, {Kind: StepIndex, Index: -1}},
		"obj.*":                       {{Kind: StepName, Name: "obj"}, {Kind: StepAll}},
		"*":                           {{Kind: StepAll}},
		"['a.b'][\"c d\"]":            {{Kind: StepName, Name: "a.b"}, {Kind: StepName, Name: "c d"}},
		"[2]":                         {{Kind: StepIndex, Index: 2}},
		"content-type.x_y":            {{Kind: StepName, Name: "content-type"}, {Kind: StepName, Name: "x_y"}},
	}
	for path, want := range accepts {
		v, err := ParseVar("post_arg." + path)
		if err != nil {
			t.Errorf("ParseVar(post_arg.%s): %v", path, err)
			continue
		}
		if v.Kind != VarPostArg || v.Name != path || v.String() != "post_arg."+path {
			t.Errorf("ParseVar(post_arg.%s) = %+v (%q)", path, v, v.String())
		}
		var got []PathStep
		for rest := v.Name; ; {
			step, next, ok := NextPathStep(rest)
			if !ok {
				break
			}
			got, rest = append(got, step), next
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("steps of %q = %+v, want %+v", path, got, want)
		}
	}
	rejects := map[string]string{
		"messages[.content[*].type": `the '[' at offset 8 is not closed`,
		"a[":                        `the '[' at offset 1 is not closed`,
		"a]":                        `unexpected ']' at offset 1`,
		"a..b":                      `recursive descent ("..") at offset 1 is not supported`,
		"a.":                        `a name is missing after the '.' at offset 1`,
		".a":                        `the path starts with '.'`,
		"a.[0]":                     `a name is missing between the '.' and the '['`,
		"a[]":                       `the brackets at offset 1 are empty`,
		"a[1:2]":                    `JSONPath slices and unions ("[1:2]" at offset 1) are not supported`,
		"a[0,1]":                    `JSONPath slices and unions`,
		"a[?(@.x==1)]":              `JSONPath filters and scripts`,
		"a[(@.length-1)]":           `JSONPath filters and scripts`,
		"a[x]":                      `"[x]" at offset 1 is not an index`,
		"a[1e3]":                    `is not an index`,
		"a[9999999999]":             `is not an index`,
		"a['b]":                     `the quote at offset 2 is not closed`,
		"a['b'":                     `the '[' at offset 1 is not closed after its quoted name`,
		"a['']":                     `the quoted name at offset 2 is empty`,
		"a b":                       `unexpected ' ' at offset 1`,
		"$.a":                       `unexpected '$' at offset 0`,
	}
	for path, want := range rejects {
		_, err := ParseVar("post_arg." + path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"post_arg.`+path+`"`) {
			t.Errorf("ParseVar(post_arg.%s) error = %v, want it to name the variable and say %q", path, err, want)
		}
	}
}
