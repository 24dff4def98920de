package conf

import (
	"errors"
	"os"
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
			`service_id, service_name, consumer_name, mqtt_client_id, http_<name>, arg_<name>, cookie_<name>`, true},
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
		{"post_arg.user", `variable "post_arg.user" is not supported: gw does not read request bodies`, false},
		{"post_arg_user", `variable "post_arg_user" is not supported`, false},
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
