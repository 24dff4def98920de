package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptrTo[T any](v T) *T { return &v }

func roundRobin(nodes ...Node) *Upstream { return &Upstream{Type: "roundrobin", Nodes: nodes} }

func hostPort(host string, port, weight int) Node {
	return Node{Host: host, Port: port, Weight: weight}
}

// seedBodies are the Admin API bodies of the seed write-ups (../shared/seeds), verbatim.
var seedBodies = map[string]struct {
	body string
	want Route
}{
	"hello": {
		`{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
		Route{URI: "/hello", Upstream: roundRobin(hostPort("127.0.0.1", 1980, 1))},
	},
	"httpbin prefix": {
		`{"uri":"/anything/*","upstream":{"type":"roundrobin","nodes":{"httpbin.org:80":1}}}`,
		Route{URI: "/anything/*", Upstream: roundRobin(hostPort("httpbin.org", 80, 1))},
	},
	"empty plugins": {
		`{"uri":"/hello","plugins":{},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
		Route{URI: "/hello", Plugins: map[string]json.RawMessage{}, Upstream: roundRobin(hostPort("127.0.0.1", 1980, 1))},
	},
	"two nodes": {
		`{"methods":["GET"],"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.2:80":1,"127.0.0.1:80":1}}}`,
		Route{URI: "/hello", Methods: []string{"GET"},
			Upstream: roundRobin(hostPort("127.0.0.1", 80, 1), hostPort("127.0.0.2", 80, 1))},
	},
	"limit-count and prometheus": {
		`{"methods":["GET"],"uri":"/hello","plugins":{"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1,"127.0.0.2:80":1}}}`,
		Route{URI: "/hello", Methods: []string{"GET"},
			Plugins: map[string]json.RawMessage{
				"limit-count": json.RawMessage(`{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"}`),
				"prometheus":  json.RawMessage(`{}`),
			},
			Upstream: roundRobin(hostPort("127.0.0.1", 80, 1), hostPort("127.0.0.2", 80, 1))},
	},
}

func TestDecodeRouteSeedBodies(t *testing.T) {
	for name, tc := range seedBodies {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeRoute([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got  %s\nwant %s", asJSON(got), asJSON(&tc.want))
			}
		})
	}
}

var routeAccepts = []struct {
	name string
	body string
	want Route
}{
	{"integer id", `{"id":1,"uri":"/a","upstream_id":7}`, Route{ID: "1", URI: "/a", UpstreamID: "7"}},
	{"string ids", `{"id":"r-1.a_B","uri":"/a","service_id":"svc"}`, Route{ID: "r-1.a_B", URI: "/a", ServiceID: "svc"}},
	{"plugin_config_id alone", `{"uri":"/a","plugin_config_id":7}`, Route{URI: "/a", PluginConfigID: "7"}},
	{"64-char id", `{"id":"` + strings.Repeat("a", 64) + `","uri":"/a","service_id":1}`,
		Route{ID: ID(strings.Repeat("a", 64)), URI: "/a", ServiceID: "1"}},
	{"uris", `{"uris":["/a","/b/*"],"plugins":{}}`, Route{URIs: []string{"/a", "/b/*"}, Plugins: map[string]json.RawMessage{}}},
	{"longest uri", `{"uri":"/` + strings.Repeat("x", 4095) + `","service_id":1}`, Route{URI: "/" + strings.Repeat("x", 4095), ServiceID: "1"}},
	{"metadata", `{"uri":"/a","service_id":1,"name":"n","desc":"","labels":{"env":"prod","team":"é-1"}}`,
		Route{URI: "/a", ServiceID: "1", Name: "n", Labels: map[string]string{"env": "prod", "team": "é-1"}}},
	{"longest name and desc", `{"uri":"/a","service_id":1,"name":"` + strings.Repeat("é", 256) + `","desc":"` + strings.Repeat("d", 256) + `"}`,
		Route{URI: "/a", ServiceID: "1", Name: strings.Repeat("é", 256), Desc: strings.Repeat("d", 256)}},
	{"empty labels", `{"uri":"/a","service_id":1,"labels":{}}`, Route{URI: "/a", ServiceID: "1"}},
	{"desc is free text, lines included", `{"uri":"/a","service_id":1,"desc":"line 1\n\tline 2"}`, Route{URI: "/a", ServiceID: "1", Desc: "line 1\n\tline 2"}},
	{"name and labels beyond ASCII", `{"uri":"/a","service_id":1,"name":"caf\u00e9 \u2713","labels":{"\u00e9":"\u00e9"}}`,
		Route{URI: "/a", ServiceID: "1", Name: "café ✓", Labels: map[string]string{"é": "é"}}},
	{"host", `{"uri":"/a","service_id":1,"host":"*.example.com"}`, Route{URI: "/a", ServiceID: "1", Host: "*.example.com"}},
	{"hosts", `{"uri":"/a","service_id":1,"hosts":["*","a.example.com","[::1]:8080","x_y.z"]}`,
		Route{URI: "/a", ServiceID: "1", Hosts: []string{"*", "a.example.com", "[::1]:8080", "x_y.z"}}},
	{"remote_addr", `{"uri":"/a","service_id":1,"remote_addr":"10.0.0.0/8"}`, Route{URI: "/a", ServiceID: "1", RemoteAddr: "10.0.0.0/8"}},
	{"remote_addrs", `{"uri":"/a","service_id":1,"remote_addrs":["127.0.0.1","::1","2001:db8::/32","0.0.0.0/0"]}`,
		Route{URI: "/a", ServiceID: "1", RemoteAddrs: []string{"127.0.0.1", "::1", "2001:db8::/32", "0.0.0.0/0"}}},
	{"every method", `{"uri":"/a","service_id":1,"methods":["GET","POST","PUT","DELETE","PATCH","HEAD","OPTIONS","CONNECT","TRACE","PURGE"]}`,
		Route{URI: "/a", ServiceID: "1", Methods: httpMethods}},
	{"no methods", `{"uri":"/a","service_id":1,"methods":[]}`, Route{URI: "/a", ServiceID: "1"}},
	{"negative priority", `{"uri":"/a","service_id":1,"priority":-5}`, Route{URI: "/a", ServiceID: "1", Priority: -5}},
	{"priority as 1e2", `{"uri":"/a","service_id":1,"priority":1e2}`, Route{URI: "/a", ServiceID: "1", Priority: 100}},
	{"status 0", `{"uri":"/a","service_id":1,"status":0}`, Route{URI: "/a", ServiceID: "1", Status: ptrTo(0)}},
	{"status 1", `{"uri":"/a","service_id":1,"status":1}`, Route{URI: "/a", ServiceID: "1", Status: ptrTo(1)}},
	{"timeout", `{"uri":"/a","service_id":1,"timeout":{"connect":1,"send":2.5,"read":0.001}}`,
		Route{URI: "/a", ServiceID: "1", Timeout: &Timeout{Connect: 1, Send: 2.5, Read: 0.001}}},
	{"websocket and times", `{"uri":"/a","service_id":1,"enable_websocket":true,"create_time":1700000000,"update_time":1700000001}`,
		Route{URI: "/a", ServiceID: "1", EnableWebsocket: true, CreateTime: 1700000000, UpdateTime: 1700000001}},
	{"plugin config kept raw and compact", "{\"uri\":\"/a\",\"plugins\":{\"p\":{ \"a\" : [1, 2],\n\"b\":\"<&>\"}}}",
		Route{URI: "/a", Plugins: map[string]json.RawMessage{"p": json.RawMessage(`{"a":[1,2],"b":"\u003c\u0026\u003e"}`)}}},
	{"upstream and upstream_id together, as APISIX allows", `{"uri":"/a","upstream_id":"u","upstream":{"nodes":[]}}`,
		Route{URI: "/a", UpstreamID: "u", Upstream: &Upstream{Nodes: Nodes{}}}},
	{"space around the body", " \n{\"uri\":\"/a\",\"service_id\":1}\n ", Route{URI: "/a", ServiceID: "1"}},
}

func TestDecodeRouteAccepts(t *testing.T) {
	for _, tc := range routeAccepts {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRoute([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got  %s\nwant %s", asJSON(got), asJSON(&tc.want))
			}
		})
	}
}

const (
	routeKnown    = "create_time, desc, enable_websocket, host, hosts, id, labels, methods, name, plugin_config_id, plugins, priority, remote_addr, remote_addrs, service_id, status, timeout, update_time, upstream, upstream_id, uri, uris, vars"
	balancerTypes = `the supported types are "roundrobin", "chash", "ewma" and "least_conn"`
	varsRule      = "must be one of uri, server_name, server_addr, request_uri, remote_port, remote_addr, query_string, host, hostname, mqtt_client_id or arg_<name>"
	upstreamKnown = "checks, create_time, desc, discovery_args, hash_on, id, keepalive_pool, key, labels, name, nodes, pass_host, retries, retry_timeout, scheme, timeout, tls, type, update_time, upstream_host"
	serviceKnown  = "create_time, desc, enable_websocket, hosts, id, labels, name, plugins, update_time, upstream, upstream_id"
	idRule        = "id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got "
	hostRule      = `must be "*" or a host name of letters, digits and "-._[]:", optionally after a leading "*", got `
	addrRule      = "must be an IPv4 or IPv6 address, optionally with a CIDR prefix length, got "
	invalidConf   = "invalid configuration: "
)

var routeRejects = []struct {
	name string
	body string
	want string
}{
	// Not JSON, or not an object.
	{"empty body", ``, invalidConf + "malformed JSON at line 1, column 1: unexpected end of JSON input"},
	{"not JSON", `hello`, invalidConf + "malformed JSON at line 1, column 1: invalid character 'h' looking for beginning of value"},
	{"trailing comma", `{"uri":"/a",}`, invalidConf + "malformed JSON at line 1, column 13: invalid character '}' looking for beginning of object key string"},
	{"invalidConf value names its field", "{\"uri\":\"/a\",\n \"priority\": x}", invalidConf + `property "priority" validation failed: malformed JSON at line 2, column 14: invalid character 'x' looking for beginning of value`},
	{"broken nested object names its path", `{"uri":"/a","upstream":{"nodes":{"a:1":1,}}}`, invalidConf + `property "upstream.nodes" validation failed: malformed JSON at line 1, column 42: invalid character '}' looking for beginning of object key string`},
	{"cut short", `{"uri":"/a","upstream":{"nodes":`, invalidConf + `property "upstream.nodes" validation failed: malformed JSON at line 1, column 32: unexpected end of JSON input`},
	{"two values", `{"uri":"/a","service_id":1} {}`, invalidConf + "malformed JSON at line 1, column 29: invalid character '{' after top-level value"},
	{"array body", `[{"uri":"/a"}]`, invalidConf + "wrong type: expected object, got array"},
	{"null body", `null`, invalidConf + "wrong type: expected object, got null"},

	// Unknown and unsupported fields.
	{"unknown field", `{"uri":"/a","service_id":1,"url":"/b"}`, invalidConf + `property "url" validation failed: unknown field (additional properties are forbidden); known fields: ` + routeKnown},
	{"APISIX 0.x's plugin_config", `{"uri":"/a","service_id":1,"plugin_config":{}}`, invalidConf + `property "plugin_config" validation failed: unknown field (additional properties are forbidden); "plugin_config" is an old APISIX name, write "plugins"; known fields: ` + routeKnown},
	{"field names are case-sensitive", `{"URI":"/a","service_id":1}`, invalidConf + `property "URI" validation failed: unknown field (additional properties are forbidden); known fields: ` + routeKnown},
	{"vars with a bad operator", `{"uri":"/a","service_id":1,"vars":[["arg_a","=","1"]]}`, `failed to validate the 'vars' expression: invalid operator '='; operators are ==, ~=, >, >=, <, <=, ~~, ~*, in, has, ipmatch and ! before one (at vars[0][1])`},
	{"filter_func", `{"uri":"/a","service_id":1,"filter_func":"function(vars) return true end"}`, invalidConf + `property "filter_func" validation failed: filter_func is not supported yet`},
	{"script", `{"uri":"/a","script":"local _M = {} return _M"}`, invalidConf + `property "script" validation failed: script is not supported yet`},
	{"script_id", `{"uri":"/a","script_id":1}`, invalidConf + `property "script_id" validation failed: script_id is not supported yet`},
	{"plugin_config_id as an object", `{"uri":"/a","plugin_config_id":{}}`, invalidConf + `property "plugin_config_id" validation failed: ` + idRule + `object`},

	// uri and uris.
	{"no uri", `{"service_id":1}`, invalidConf + `property "uri" validation failed: is required (or "uris")`},
	{"uri and uris", `{"uri":"/a","uris":["/b"],"service_id":1}`, invalidConf + `property "uris" validation failed: only one of uri or uris is allowed`},
	{"empty uri", `{"uri":"","service_id":1}`, invalidConf + `property "uri" validation failed: must be 1-4096 characters long, got 0`},
	{"uri without slash", `{"uri":"hello","service_id":1}`, invalidConf + `property "uri" validation failed: must start with "/", got "hello"`},
	{"uri too long", `{"uri":"/` + strings.Repeat("x", 4096) + `","service_id":1}`, invalidConf + `property "uri" validation failed: must be 1-4096 characters long, got 4097`},
	{"uri not a string", `{"uri":1,"service_id":1}`, invalidConf + `property "uri" validation failed: wrong type: expected string, got number 1`},
	{"uri null", `{"uri":null,"service_id":1}`, invalidConf + `property "uri" validation failed: wrong type: expected string, got null`},
	{"empty uris", `{"uris":[],"service_id":1}`, invalidConf + `property "uris" validation failed: must have at least 1 item(s), got 0`},
	{"uris not an array", `{"uris":"/a","service_id":1}`, invalidConf + `property "uris" validation failed: wrong type: expected array, got string "/a"`},
	{"repeated uris", `{"uris":["/a","/b","/a"],"service_id":1}`, invalidConf + `property "uris" validation failed: expected unique items but items 1 and 3 are equal`},
	{"invalidConf uris item", `{"uris":["/a","b"],"service_id":1}`, invalidConf + `property "uris" validation failed: failed to validate item 2: must start with "/", got "b"`},
	{"uris item not a string", `{"uris":["/a",{}],"service_id":1}`, invalidConf + `property "uris" validation failed: failed to validate item 2: wrong type: expected string, got object`},

	// host, hosts, remote_addr, remote_addrs.
	{"host and hosts", `{"uri":"/a","service_id":1,"host":"a.com","hosts":["b.com"]}`, invalidConf + `property "hosts" validation failed: only one of host or hosts is allowed`},
	{"empty host", `{"uri":"/a","service_id":1,"host":""}`, invalidConf + `property "host" validation failed: ` + hostRule + `""`},
	{"host with space", `{"uri":"/a","service_id":1,"host":"a b.com"}`, invalidConf + `property "host" validation failed: ` + hostRule + `"a b.com"`},
	{"star inside host", `{"uri":"/a","service_id":1,"host":"a.*.com"}`, invalidConf + `property "host" validation failed: ` + hostRule + `"a.*.com"`},
	{"two stars", `{"uri":"/a","service_id":1,"host":"**"}`, invalidConf + `property "host" validation failed: ` + hostRule + `"**"`},
	{"host with slash", `{"uri":"/a","service_id":1,"host":"a.com/x"}`, invalidConf + `property "host" validation failed: ` + hostRule + `"a.com/x"`},
	{"empty hosts", `{"uri":"/a","service_id":1,"hosts":[]}`, invalidConf + `property "hosts" validation failed: must have at least 1 item(s), got 0`},
	{"repeated hosts", `{"uri":"/a","service_id":1,"hosts":["a.com","a.com"]}`, invalidConf + `property "hosts" validation failed: expected unique items but items 1 and 2 are equal`},
	{"invalidConf hosts item", `{"uri":"/a","service_id":1,"hosts":["a.com","é.com"]}`, invalidConf + `property "hosts" validation failed: failed to validate item 2: ` + hostRule + `"é.com"`},
	{"remote_addr and remote_addrs", `{"uri":"/a","service_id":1,"remote_addr":"::1","remote_addrs":["::1"]}`, invalidConf + `property "remote_addrs" validation failed: only one of remote_addr or remote_addrs is allowed`},
	{"prefix too long", `{"uri":"/a","service_id":1,"remote_addr":"10.0.0.0/33"}`, invalidConf + `property "remote_addr" validation failed: ` + addrRule + `"10.0.0.0/33"`},
	{"short address", `{"uri":"/a","service_id":1,"remote_addr":"10.0.0"}`, invalidConf + `property "remote_addr" validation failed: ` + addrRule + `"10.0.0"`},
	{"name as remote_addr", `{"uri":"/a","service_id":1,"remote_addr":"localhost"}`, invalidConf + `property "remote_addr" validation failed: ` + addrRule + `"localhost"`},
	{"zone in remote_addr", `{"uri":"/a","service_id":1,"remote_addr":"fe80::1%eth0"}`, invalidConf + `property "remote_addr" validation failed: ` + addrRule + `"fe80::1%eth0"`},
	{"empty remote_addrs", `{"uri":"/a","service_id":1,"remote_addrs":[]}`, invalidConf + `property "remote_addrs" validation failed: must have at least 1 item(s), got 0`},
	{"repeated remote_addrs", `{"uri":"/a","service_id":1,"remote_addrs":["::1","::1"]}`, invalidConf + `property "remote_addrs" validation failed: expected unique items but items 1 and 2 are equal`},
	{"invalidConf remote_addrs item", `{"uri":"/a","service_id":1,"remote_addrs":["::1","::g"]}`, invalidConf + `property "remote_addrs" validation failed: failed to validate item 2: ` + addrRule + `"::g"`},

	// methods, priority, status, enable_websocket, times.
	{"lower-case method", `{"uri":"/a","service_id":1,"methods":["GET","get"]}`, invalidConf + `property "methods" validation failed: failed to validate item 2: matches none of the enum values (GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS, CONNECT, TRACE, PURGE), got "get"`},
	{"repeated method", `{"uri":"/a","service_id":1,"methods":["GET","GET"]}`, invalidConf + `property "methods" validation failed: expected unique items but items 1 and 2 are equal`},
	{"methods as a string", `{"uri":"/a","service_id":1,"methods":"GET"}`, invalidConf + `property "methods" validation failed: wrong type: expected array, got string "GET"`},
	{"priority as a string", `{"uri":"/a","service_id":1,"priority":"high"}`, invalidConf + `property "priority" validation failed: wrong type: expected integer, got string "high"`},
	{"fractional priority", `{"uri":"/a","service_id":1,"priority":1.5}`, invalidConf + `property "priority" validation failed: wrong type: expected integer, got number 1.5`},
	{"huge priority", `{"uri":"/a","service_id":1,"priority":1e300}`, invalidConf + `property "priority" validation failed: integer out of range, got 1e300`},
	{"priority past int64", `{"uri":"/a","service_id":1,"priority":9223372036854775808}`, invalidConf + `property "priority" validation failed: integer out of range, got 9223372036854775808`},
	{"status 2", `{"uri":"/a","service_id":1,"status":2}`, invalidConf + `property "status" validation failed: matches none of the enum values (0, 1), got 2`},
	{"status as a string", `{"uri":"/a","service_id":1,"status":"1"}`, invalidConf + `property "status" validation failed: wrong type: expected integer, got string "1"`},
	{"status as a boolean", `{"uri":"/a","service_id":1,"status":true}`, invalidConf + `property "status" validation failed: wrong type: expected integer, got boolean true`},
	{"enable_websocket as a string", `{"uri":"/a","service_id":1,"enable_websocket":"yes"}`, invalidConf + `property "enable_websocket" validation failed: wrong type: expected boolean, got string "yes"`},
	{"create_time as a string", `{"uri":"/a","service_id":1,"create_time":"now"}`, invalidConf + `property "create_time" validation failed: wrong type: expected integer, got string "now"`},
	{"fractional update_time", `{"uri":"/a","service_id":1,"update_time":1.5}`, invalidConf + `property "update_time" validation failed: wrong type: expected integer, got number 1.5`},
	{"long value cut short", `{"uri":"/a","service_id":1,"priority":"` + strings.Repeat("x", 50) + `"}`, invalidConf + `property "priority" validation failed: wrong type: expected integer, got string "` + strings.Repeat("x", 39) + `..."`},

	// timeout.
	{"timeout without read", `{"uri":"/a","service_id":1,"timeout":{"connect":1,"send":1}}`, invalidConf + `property "timeout.read" validation failed: is required`},
	{"zero timeout", `{"uri":"/a","service_id":1,"timeout":{"connect":0,"send":1,"read":1}}`, invalidConf + `property "timeout.connect" validation failed: must be 0.001-31536000 seconds, got 0`},
	{"negative timeout", `{"uri":"/a","service_id":1,"timeout":{"connect":1,"send":-1,"read":1}}`, invalidConf + `property "timeout.send" validation failed: must be 0.001-31536000 seconds, got -1`},
	{"timeout as a string", `{"uri":"/a","service_id":1,"timeout":{"connect":1,"send":1,"read":"5s"}}`, invalidConf + `property "timeout.read" validation failed: wrong type: expected number, got string "5s"`},
	{"unknown timeout member", `{"uri":"/a","service_id":1,"timeout":{"connect":1,"send":1,"read":1,"recv":1}}`, invalidConf + `property "timeout.recv" validation failed: unknown field (additional properties are forbidden); known fields: connect, read, send`},
	{"timeout as a number", `{"uri":"/a","service_id":1,"timeout":5}`, invalidConf + `property "timeout" validation failed: wrong type: expected object, got number 5`},

	// name, desc, labels.
	{"empty name", `{"uri":"/a","service_id":1,"name":""}`, invalidConf + `property "name" validation failed: must be 1-256 characters long, got 0`},
	{"name too long", `{"uri":"/a","service_id":1,"name":"` + strings.Repeat("é", 257) + `"}`, invalidConf + `property "name" validation failed: must be 1-256 characters long, got 257`},
	{"desc too long", `{"uri":"/a","service_id":1,"desc":"` + strings.Repeat("d", 257) + `"}`, invalidConf + `property "desc" validation failed: must be at most 256 characters long, got 257`},
	{"label with space", `{"uri":"/a","service_id":1,"labels":{"env":"pro d"}}`, invalidConf + `property "labels.env" validation failed: must be 1-256 characters with no white space, got "pro d"`},
	{"empty label", `{"uri":"/a","service_id":1,"labels":{"env":""}}`, invalidConf + `property "labels.env" validation failed: must be 1-256 characters with no white space, got ""`},
	{"label too long", `{"uri":"/a","service_id":1,"labels":{"env":"` + strings.Repeat("x", 257) + `"}}`, invalidConf + `property "labels.env" validation failed: must be 1-256 characters with no white space, got "` + strings.Repeat("x", 257) + `"`},
	{"label as a number", `{"uri":"/a","service_id":1,"labels":{"version":1}}`, invalidConf + `property "labels.version" validation failed: wrong type: expected string, got number 1`},
	{"labels as an array", `{"uri":"/a","service_id":1,"labels":["a"]}`, invalidConf + `property "labels" validation failed: wrong type: expected object, got array`},
	{"control character in name", `{"uri":"/a","service_id":1,"name":"a\u001b[2Jb"}`, invalidConf + `property "name" validation failed: must not contain control characters (byte 0x1b at offset 1), got "a\x1b[2Jb"`},
	{"newline in name", `{"uri":"/a","service_id":1,"name":"a\nb"}`, invalidConf + `property "name" validation failed: must not contain control characters (byte 0x0a at offset 1), got "a\nb"`},
	{"DEL in name", `{"uri":"/a","service_id":1,"name":"\u007f"}`, invalidConf + `property "name" validation failed: must not contain control characters (byte 0x7f at offset 0), got "\x7f"`},
	{"NUL in name", `{"uri":"/a","service_id":1,"name":"a\u0000"}`, invalidConf + `property "name" validation failed: must not contain control characters (byte 0x00 at offset 1), got "a\x00"`},
	{"control character in a label", `{"uri":"/a","service_id":1,"labels":{"env":"a\u0001"}}`, invalidConf + `property "labels.env" validation failed: must not contain control characters (byte 0x01 at offset 1), got "a\x01"`},
	{"control character in a label name", `{"uri":"/a","service_id":1,"labels":{"e\tnv":"a"}}`, invalidConf + `property "labels" validation failed: label name must not contain control characters (byte 0x09 at offset 1), got "e\tnv"`},
	{"NUL in uri", `{"uri":"/a\u0000","service_id":1}`, invalidConf + `property "uri" validation failed: must not contain control characters (byte 0x00 at offset 2), got "/a\x00"`},
	{"carriage return in uri", `{"uri":"/a\r\nX-Injected: 1","service_id":1}`, invalidConf + `property "uri" validation failed: must not contain control characters (byte 0x0d at offset 2), got "/a\r\nX-Injected: 1"`},
	{"control character in uris", `{"uris":["/a","/b\u0001"],"service_id":1}`, invalidConf + `property "uris" validation failed: failed to validate item 2: must not contain control characters (byte 0x01 at offset 2), got "/b\x01"`},
	{"NUL in host", `{"uri":"/a","service_id":1,"host":"a\u0000.com"}`, invalidConf + `property "host" validation failed: ` + hostRule + `"a\x00.com"`},

	// What the route does.
	{"nothing to do", `{"uri":"/a"}`, invalidConf + `a route needs at least one of "plugins", "upstream", "upstream_id", "service_id" or "plugin_config_id"`},
	{"plugins as an array", `{"uri":"/a","plugins":[]}`, invalidConf + `property "plugins" validation failed: wrong type: expected object, got array`},

	// ids.
	{"empty id", `{"id":"","uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `string ""`},
	{"id with slash", `{"id":"a/b","uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `string "a/b"`},
	{"id too long", `{"id":"` + strings.Repeat("a", 65) + `","uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `string "` + strings.Repeat("a", 39) + `..."`},
	{"id 0", `{"id":0,"uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `number 0`},
	{"negative id", `{"id":-1,"uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `number -1`},
	{"fractional id", `{"id":1.5,"uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `number 1.5`},
	{"id as a boolean", `{"id":true,"uri":"/a","service_id":1}`, invalidConf + `property "id" validation failed: ` + idRule + `boolean true`},
	{"invalidConf service_id", `{"uri":"/a","service_id":"a b"}`, invalidConf + `property "service_id" validation failed: ` + idRule + `string "a b"`},
	{"invalidConf upstream_id", `{"uri":"/a","upstream_id":null}`, invalidConf + `property "upstream_id" validation failed: ` + idRule + `null`},

	// The inline upstream reports under "upstream.".
	{"invalidConf port in upstream", `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:99999":1}}}`, invalidConf + `property "upstream.nodes" validation failed: node "127.0.0.1:99999": port must be 1-65535`},
	{"chash upstream without key", `{"uri":"/a","upstream":{"type":"chash","nodes":{"127.0.0.1:80":1}}}`, invalidConf + `property "upstream.key" validation failed: missing key: required when type is "chash" and hash_on is "vars"`},
	{"upstream without nodes", `{"uri":"/a","upstream":{"type":"roundrobin"}}`, invalidConf + `property "upstream.nodes" validation failed: is required (service discovery is not supported yet)`},
	{"unknown upstream field", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"node":{}}}`, invalidConf + `property "upstream.node" validation failed: unknown field (additional properties are forbidden); known fields: ` + upstreamKnown},
	{"deep upstream path", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"keepalive_pool":{"size":0}}}`, invalidConf + `property "upstream.keepalive_pool.size" validation failed: must be 1-1048576, got 0`},
	{"upstream as an array", `{"uri":"/a","upstream":[]}`, invalidConf + `property "upstream" validation failed: wrong type: expected object, got array`},
}

func TestDecodeRouteRejects(t *testing.T) {
	for _, tc := range routeRejects {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRoute([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %s", asJSON(r))
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

var upstreamAccepts = []struct {
	name string
	body string
	want Upstream
}{
	{"map nodes sorted by key", `{"nodes":{"b.example:80":2,"a.example":1,"[::1]:8080":0,"[2001:db8::1]":3,"10.0.0.1:1":4}}`,
		Upstream{Nodes: Nodes{hostPort("10.0.0.1", 1, 4), hostPort("2001:db8::1", 0, 3), hostPort("::1", 8080, 0), hostPort("a.example", 0, 1), hostPort("b.example", 80, 2)}}},
	{"array nodes in their order", `{"nodes":[{"host":"b.example","port":65535,"weight":2,"priority":-1,"metadata":{"zone":"x","n":1}},{"host":"[::1]","weight":0},{"host":"1.2.3.4","port":1,"weight":1,"metadata":{}}]}`,
		Upstream{Nodes: Nodes{
			{Host: "b.example", Port: 65535, Weight: 2, Priority: -1, Metadata: map[string]any{"zone": "x", "n": 1.0}},
			{Host: "::1", Weight: 0},
			{Host: "1.2.3.4", Port: 1, Weight: 1},
		}}},
	// APISIX's host pattern allows underscores; Docker's DNS names hold them.
	{"a host name with an underscore", `{"nodes":{"my_backend:8080":1}}`, Upstream{Nodes: Nodes{hostPort("my_backend", 8080, 1)}}},
	{"empty map nodes", `{"nodes":{}}`, Upstream{Nodes: Nodes{}}},
	{"empty array nodes", `{"nodes":[]}`, Upstream{Nodes: Nodes{}}},
	{"dns names", `{"nodes":{"localhost:80":1,"a-b.c-d.example.:80":1,"xn--bcher-kva.example:80":1,"1a.example:80":1}}`,
		Upstream{Nodes: Nodes{hostPort("1a.example", 80, 1), hostPort("a-b.c-d.example.", 80, 1), hostPort("localhost", 80, 1), hostPort("xn--bcher-kva.example", 80, 1)}}},
	{"every supported field", `{"id":"u1","name":"backend","desc":"d","labels":{"k":"v"},"type":"roundrobin","nodes":{"127.0.0.1:80":1},` +
		`"retries":0,"retry_timeout":0,"timeout":{"connect":1,"send":2,"read":3},"keepalive_pool":{"size":1,"idle_timeout":0,"requests":1},` +
		`"scheme":"http","pass_host":"rewrite","upstream_host":"example.com","create_time":1,"update_time":2}`,
		Upstream{ID: "u1", Name: "backend", Desc: "d", Labels: map[string]string{"k": "v"}, Type: "roundrobin",
			Nodes: Nodes{hostPort("127.0.0.1", 80, 1)}, Retries: ptrTo(0), RetryTimeout: ptrTo(0.0),
			Timeout: &Timeout{Connect: 1, Send: 2, Read: 3}, KeepalivePool: &KeepalivePool{Size: 1, IdleTimeout: 0, Requests: 1},
			Scheme: "http", PassHost: "rewrite", UpstreamHost: "example.com", CreateTime: 1, UpdateTime: 2}},
	{"keepalive_pool members default", `{"nodes":{"a:1":1},"keepalive_pool":{"size":8}}`,
		Upstream{Nodes: Nodes{hostPort("a", 1, 1)}, KeepalivePool: &KeepalivePool{Size: 8, IdleTimeout: 60, Requests: 1000}}},
	{"empty keepalive_pool", `{"nodes":{"a:1":1},"keepalive_pool":{}}`,
		Upstream{Nodes: Nodes{hostPort("a", 1, 1)}, KeepalivePool: &KeepalivePool{Size: 320, IdleTimeout: 60, Requests: 1000}}},
	{"pass_host node", `{"nodes":{"a:1":1},"pass_host":"node","retries":3,"retry_timeout":0.5}`,
		Upstream{Nodes: Nodes{hostPort("a", 1, 1)}, PassHost: "node", Retries: ptrTo(3), RetryTimeout: ptrTo(0.5)}},
	{"chash default hash_on", `{"type":"chash","key":"remote_addr","nodes":{"a:1":1}}`,
		Upstream{Type: "chash", Key: "remote_addr", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"chash every var", `{"type":"chash","hash_on":"vars","key":"mqtt_client_id","nodes":{"a:1":1}}`,
		Upstream{Type: "chash", HashOn: "vars", Key: "mqtt_client_id", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"chash arg with APISIX's A-z class", "{\"type\":\"chash\",\"key\":\"arg_a-B_9[^`\",\"nodes\":{\"a:1\":1}}",
		Upstream{Type: "chash", Key: "arg_a-B_9[^`", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"chash header", `{"type":"chash","hash_on":"header","key":"X-User_Id","nodes":{"a:1":1}}`,
		Upstream{Type: "chash", HashOn: "header", Key: "X-User_Id", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"chash cookie", `{"type":"chash","hash_on":"cookie","key":"session","nodes":{"a:1":1}}`,
		Upstream{Type: "chash", HashOn: "cookie", Key: "session", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"chash consumer needs no key", `{"type":"chash","hash_on":"consumer","nodes":{"a:1":1}}`,
		Upstream{Type: "chash", HashOn: "consumer", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"chash vars_combinations", `{"type":"chash","hash_on":"vars_combinations","key":"$remote_addr ${http_x ?? none}","nodes":{"a:1":1}}`,
		Upstream{Type: "chash", HashOn: "vars_combinations", Key: "$remote_addr ${http_x ?? none}", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"hash_on and key ignored without chash", `{"type":"roundrobin","hash_on":"header","key":"not a header","nodes":{"a:1":1}}`,
		Upstream{Type: "roundrobin", HashOn: "header", Key: "not a header", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"least_conn", `{"type":"least_conn","nodes":{"a:1":1}}`, Upstream{Type: "least_conn", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"ewma", `{"type":"ewma","nodes":{"a:1":1}}`, Upstream{Type: "ewma", Nodes: Nodes{hostPort("a", 1, 1)}}},
	{"upstream_host without rewrite is kept", `{"nodes":{"a:1":1},"pass_host":"pass","upstream_host":"*.b"}`,
		Upstream{Nodes: Nodes{hostPort("a", 1, 1)}, PassHost: "pass", UpstreamHost: "*.b"}},
}

func TestDecodeUpstreamAccepts(t *testing.T) {
	for _, tc := range upstreamAccepts {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeUpstream([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got  %s\nwant %s", asJSON(got), asJSON(&tc.want))
			}
		})
	}
}

var upstreamRejects = []struct {
	name string
	body string
	want string
}{
	{"unknown field", `{"nodes":{"a:1":1},"retry":1}`, invalidConf + `property "retry" validation failed: unknown field (additional properties are forbidden); known fields: ` + upstreamKnown},
	{"unknown type", `{"type":"random","nodes":{"a:1":1}}`, invalidConf + `property "type" validation failed: unknown balancer type "random"; ` + balancerTypes},
	{"empty type", `{"type":"","nodes":{"a:1":1}}`, invalidConf + `property "type" validation failed: unknown balancer type ""; ` + balancerTypes},
	{"type as a number", `{"type":1,"nodes":{"a:1":1}}`, invalidConf + `property "type" validation failed: wrong type: expected string, got number 1`},

	// chash's hash_on and key (APISIX's check_upstream_conf).
	{"chash without key", `{"type":"chash","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: missing key: required when type is "chash" and hash_on is "vars"`},
	{"chash header without key", `{"type":"chash","hash_on":"header","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: missing key: required when type is "chash" and hash_on is "header"`},
	{"chash empty key", `{"type":"chash","hash_on":"cookie","key":"","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: missing key: required when type is "chash" and hash_on is "cookie"`},
	{"chash vars_combinations without key", `{"type":"chash","hash_on":"vars_combinations","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: missing key: required when type is "chash" and hash_on is "vars_combinations"`},
	{"chash unknown var", `{"type":"chash","key":"http_x","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: ` + varsRule + ` with hash_on "vars": got "http_x"`},
	{"chash var with prefix", `{"type":"chash","key":"xuri","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: ` + varsRule + ` with hash_on "vars": got "xuri"`},
	{"chash var with suffix", `{"type":"chash","key":"uri ","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: ` + varsRule + ` with hash_on "vars": got "uri "`},
	{"chash empty arg name", `{"type":"chash","key":"arg_","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: ` + varsRule + ` with hash_on "vars": got "arg_"`},
	{"chash vars_combinations unknown variable", `{"type":"chash","hash_on":"vars_combinations","key":"$remote_addr-$nope","nodes":{"a:1":1}}`,
		invalidConf + `property "key" validation failed: unknown variable "nope"; supported: ` + supportedVars},
	{"chash vars_combinations post_arg bad path", `{"type":"chash","hash_on":"vars_combinations","key":"${post_arg.id[}","nodes":{"a:1":1}}`,
		invalidConf + `property "key" validation failed: invalid variable "post_arg.id[": the '[' at offset 2 is not closed`},
	{"chash arg with a dot", `{"type":"chash","key":"arg_a.b","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: ` + varsRule + ` with hash_on "vars": got "arg_a.b"`},
	{"chash $ in var", `{"type":"chash","hash_on":"vars","key":"$remote_addr","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: ` + varsRule + ` with hash_on "vars": got "$remote_addr"`},
	{"chash header with a space", `{"type":"chash","hash_on":"header","key":"X User","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: must be a header name of letters, digits, '-' and '_' with hash_on "header": got "X User"`},
	{"chash cookie with a colon", `{"type":"chash","hash_on":"cookie","key":"a:b","nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: must be a cookie name of letters, digits, '-' and '_' with hash_on "cookie": got "a:b"`},
	{"unknown hash_on", `{"type":"chash","hash_on":"query","key":"a","nodes":{"a:1":1}}`, invalidConf + `property "hash_on" validation failed: matches none of the enum values (vars, header, cookie, consumer, vars_combinations), got "query"`},
	{"unknown hash_on without chash", `{"hash_on":"ip","nodes":{"a:1":1}}`, invalidConf + `property "hash_on" validation failed: matches none of the enum values (vars, header, cookie, consumer, vars_combinations), got "ip"`},
	{"key as a number", `{"type":"chash","key":1,"nodes":{"a:1":1}}`, invalidConf + `property "key" validation failed: wrong type: expected string, got number 1`},
	{"no nodes", `{"type":"roundrobin"}`, invalidConf + `property "nodes" validation failed: is required (service discovery is not supported yet)`},
	{"service discovery", `{"service_name":"a","discovery_type":"dns"}`, invalidConf + `property "discovery_type" validation failed: discovery_type is not supported yet`},
	{"service_name", `{"service_name":"a"}`, invalidConf + `property "service_name" validation failed: service_name is not supported yet`},
	{"discovery_args with a member", `{"discovery_args":{"group_name":"g"},"nodes":{"a:1":1}}`, invalidConf + `property "discovery_args" validation failed: discovery_args is not supported yet (service discovery); only an empty object is accepted, got member "group_name"`},
	{"discovery_args not an object", `{"discovery_args":[],"nodes":{"a:1":1}}`, invalidConf + `property "discovery_args" validation failed: wrong type: expected object, got array`},
	{"checks without active", `{"checks":{},"nodes":{"a:1":1}}`, invalidConf + `property "checks.active" validation failed: is required`},
	{"tls", `{"tls":{"client_cert_id":1},"nodes":{"a:1":1}}`, invalidConf + `property "tls" validation failed: applies only to schemes "https" and "grpcs", got scheme "http"; set "scheme": "https" (or "grpcs") or remove tls`},
	{"nodes as a string", `{"nodes":"a:1"}`, invalidConf + `property "nodes" validation failed: wrong type: expected object or array, got string "a:1"`},
	{"nodes null", `{"nodes":null}`, invalidConf + `property "nodes" validation failed: wrong type: expected object or array, got null`},

	// Map-form nodes.
	{"port too big", `{"nodes":{"127.0.0.1:99999":1}}`, invalidConf + `property "nodes" validation failed: node "127.0.0.1:99999": port must be 1-65535`},
	{"port 0", `{"nodes":{"127.0.0.1:0":1}}`, invalidConf + `property "nodes" validation failed: node "127.0.0.1:0": port must be 1-65535`},
	{"empty port", `{"nodes":{"127.0.0.1:":1}}`, invalidConf + `property "nodes" validation failed: node "127.0.0.1:": port must be 1-65535`},
	{"signed port", `{"nodes":{"a:+80":1}}`, invalidConf + `property "nodes" validation failed: node "a:+80": port must be 1-65535`},
	{"named port", `{"nodes":{"a:http":1}}`, invalidConf + `property "nodes" validation failed: node "a:http": port must be 1-65535`},
	{"empty host", `{"nodes":{":80":1}}`, invalidConf + `property "nodes" validation failed: node ":80": host "" is neither an IP address nor a valid DNS name`},
	// APISIX's t/admin/upstream.t TEST 23 "verify wrong Ipv6" and t/core/schema_def.t
	// TEST 5: a list-form host that is an IPv6 address needs brackets, in APISIX's words.
	// APISIX checks only the list form; gw words the map form's refusal the same way.
	{"IPv6 without brackets", `{"nodes":{"::1:80":1}}`, invalidConf + `property "nodes" validation failed: node "::1:80": IPv6 address must be enclosed with '[' and ']', e.g. "[::1]:80"`},
	{"node IPv6 without brackets", `{"type":"roundrobin","nodes":[{"host":"::1","port":80,"weight":1}]}`,
		invalidConf + `property "nodes[0].host" validation failed: IPv6 address must be enclosed with '[' and ']', got "::1"`},
	{"node long IPv6 without brackets", `{"nodes":[{"host":"2001:db8::1","port":80,"weight":1}]}`,
		invalidConf + `property "nodes[0].host" validation failed: IPv6 address must be enclosed with '[' and ']', got "2001:db8::1"`},
	{"IPv4 in brackets", `{"nodes":{"[127.0.0.1]:80":1}}`, invalidConf + `property "nodes" validation failed: node "[127.0.0.1]:80": only an IPv6 address goes in brackets`},
	{"unclosed bracket", `{"nodes":{"[::1:80":1}}`, invalidConf + `property "nodes" validation failed: node "[::1:80": missing ']' after the IPv6 address`},
	{"text after bracket", `{"nodes":{"[::1]80":1}}`, invalidConf + `property "nodes" validation failed: node "[::1]80": expected ':port' after ']'`},
	{"bracketed port 0", `{"nodes":{"[::1]:0":1}}`, invalidConf + `property "nodes" validation failed: node "[::1]:0": port must be 1-65535`},
	{"other punctuation in name", `{"nodes":{"my+backend:80":1}}`, invalidConf + `property "nodes" validation failed: node "my+backend:80": host "my+backend" is neither an IP address nor a valid DNS name`},
	{"label starting with a hyphen", `{"nodes":{"-a.example:80":1}}`, invalidConf + `property "nodes" validation failed: node "-a.example:80": host "-a.example" is neither an IP address nor a valid DNS name`},
	{"label ending with a hyphen", `{"nodes":{"a-.example:80":1}}`, invalidConf + `property "nodes" validation failed: node "a-.example:80": host "a-.example" is neither an IP address nor a valid DNS name`},
	{"empty label", `{"nodes":{"a..example:80":1}}`, invalidConf + `property "nodes" validation failed: node "a..example:80": host "a..example" is neither an IP address nor a valid DNS name`},
	{"label too long", `{"nodes":{"` + strings.Repeat("a", 64) + `.example:80":1}}`, invalidConf + `property "nodes" validation failed: node "` + strings.Repeat("a", 64) + `.example:80": host "` + strings.Repeat("a", 64) + `.example" is neither an IP address nor a valid DNS name`},
	{"name too long", `{"nodes":{"` + strings.Repeat("a.", 127) + `ab:80":1}}`, invalidConf + `property "nodes" validation failed: node "` + strings.Repeat("a.", 127) + `ab:80": host "` + strings.Repeat("a.", 127) + `ab" is neither an IP address nor a valid DNS name`},
	{"mistyped IPv4", `{"nodes":{"256.1.1.1:80":1}}`, invalidConf + `property "nodes" validation failed: node "256.1.1.1:80": host "256.1.1.1" is neither an IP address nor a valid DNS name`},
	{"negative weight", `{"nodes":{"a:80":-1}}`, invalidConf + `property "nodes" validation failed: node "a:80": weight must be 0-1000000, got -1`},
	{"weight as a string", `{"nodes":{"a:80":"1"}}`, invalidConf + `property "nodes" validation failed: node "a:80": weight wrong type: expected integer, got string "1"`},
	{"fractional weight", `{"nodes":{"a:80":0.5}}`, invalidConf + `property "nodes" validation failed: node "a:80": weight wrong type: expected integer, got number 0.5`},

	// Array-form nodes.
	{"node without host", `{"nodes":[{"port":80,"weight":1}]}`, invalidConf + `property "nodes[0].host" validation failed: is required`},
	{"node without weight", `{"nodes":[{"host":"a","weight":1},{"host":"a","port":80}]}`, invalidConf + `property "nodes[1].weight" validation failed: is required`},
	{"node port 0", `{"nodes":[{"host":"a","port":0,"weight":1}]}`, invalidConf + `property "nodes[0].port" validation failed: must be 1-65535, got 0`},
	{"node port too big", `{"nodes":[{"host":"a","port":65536,"weight":1}]}`, invalidConf + `property "nodes[0].port" validation failed: must be 1-65535, got 65536`},
	{"node host with port", `{"nodes":[{"host":"a:80","weight":1}]}`, invalidConf + `property "nodes[0].host" validation failed: host "a:80" is neither an IP address nor a valid DNS name`},
	{"node IPv4 in brackets", `{"nodes":[{"host":"[1.2.3.4]","weight":1}]}`, invalidConf + `property "nodes[0].host" validation failed: host "[1.2.3.4]": only an IPv6 address goes in brackets`},
	{"node negative weight", `{"nodes":[{"host":"a","weight":-2}]}`, invalidConf + `property "nodes[0].weight" validation failed: must be 0-1000000, got -2`},
	{"node fractional priority", `{"nodes":[{"host":"a","weight":1,"priority":0.5}]}`, invalidConf + `property "nodes[0].priority" validation failed: wrong type: expected integer, got number 0.5`},
	{"node metadata not an object", `{"nodes":[{"host":"a","weight":1,"metadata":[]}]}`, invalidConf + `property "nodes[0].metadata" validation failed: wrong type: expected object, got array`},
	{"misspelt node field", `{"nodes":[{"host":"a","weight":1,"wieght":1}]}`, invalidConf + `property "nodes[0].wieght" validation failed: unknown field (additional properties are forbidden); known fields: host, metadata, port, priority, weight`},
	{"node not an object", `{"nodes":["a:80"]}`, invalidConf + `property "nodes[0]" validation failed: wrong type: expected object, got string "a:80"`},

	// Numbers and enums.
	{"negative retries", `{"nodes":{"a:1":1},"retries":-1}`, invalidConf + `property "retries" validation failed: must be >= 0, got -1`},
	{"fractional retries", `{"nodes":{"a:1":1},"retries":1.5}`, invalidConf + `property "retries" validation failed: wrong type: expected integer, got number 1.5`},
	{"negative retry_timeout", `{"nodes":{"a:1":1},"retry_timeout":-0.5}`, invalidConf + `property "retry_timeout" validation failed: must be 0 or 0.001-31536000 seconds, got -0.5`},
	{"timeout without send", `{"nodes":{"a:1":1},"timeout":{"connect":1,"read":1}}`, invalidConf + `property "timeout.send" validation failed: is required`},
	{"keepalive size 0", `{"nodes":{"a:1":1},"keepalive_pool":{"size":0}}`, invalidConf + `property "keepalive_pool.size" validation failed: must be 1-1048576, got 0`},
	{"negative idle_timeout", `{"nodes":{"a:1":1},"keepalive_pool":{"idle_timeout":-1}}`, invalidConf + `property "keepalive_pool.idle_timeout" validation failed: must be 0 or 0.001-31536000 seconds, got -1`},
	{"keepalive requests 0", `{"nodes":{"a:1":1},"keepalive_pool":{"requests":0}}`, invalidConf + `property "keepalive_pool.requests" validation failed: must be >= 1, got 0`},
	{"unknown keepalive member", `{"nodes":{"a:1":1},"keepalive_pool":{"timeout":1}}`, invalidConf + `property "keepalive_pool.timeout" validation failed: unknown field (additional properties are forbidden); known fields: idle_timeout, requests, size`},
	{"tcp", `{"nodes":{"a:1":1},"scheme":"tcp"}`, invalidConf + `property "scheme" validation failed: "tcp" is not supported yet`},
	{"tls over grpc", `{"nodes":{"a:1":1},"scheme":"grpc","tls":{"verify":true}}`, invalidConf + `property "tls" validation failed: applies only to schemes "https" and "grpcs", got scheme "grpc"; set "scheme": "https" (or "grpcs") or remove tls`},
	{"grpc with an http check", `{"nodes":{"a:1":1},"scheme":"grpc","checks":{"active":{"type":"http"}}}`, invalidConf + `property "checks.active.type" validation failed: must be "tcp" for scheme "grpc", got "http": an HTTP/1.1 probe cannot check a gRPC node (gRPC health checking is not supported yet)`},
	{"grpcs with passive checks", `{"nodes":{"a:1":1},"scheme":"grpcs","checks":{"active":{"type":"tcp"},"passive":{"type":"tcp"}}}`, invalidConf + `property "checks.passive" validation failed: passive health checks are not supported yet for scheme "grpcs"; use an active check of type tcp`},
	{"unknown scheme", `{"nodes":{"a:1":1},"scheme":"ftp"}`, invalidConf + `property "scheme" validation failed: matches none of the enum values (grpc, grpcs, http, https, tcp, tls, udp, kafka), got "ftp"`},
	{"unknown pass_host", `{"nodes":{"a:1":1},"pass_host":"keep"}`, invalidConf + `property "pass_host" validation failed: matches none of the enum values (pass, node, rewrite), got "keep"`},
	{"rewrite without upstream_host", `{"nodes":{"a:1":1},"pass_host":"rewrite"}`, invalidConf + `property "upstream_host" validation failed: is required when pass_host is "rewrite"`},
	{"invalidConf upstream_host", `{"nodes":{"a:1":1},"pass_host":"rewrite","upstream_host":"a b"}`, invalidConf + `property "upstream_host" validation failed: ` + hostRule + `"a b"`},
	{"invalidConf upstream id", `{"id":"a b","nodes":{"a:1":1}}`, invalidConf + `property "id" validation failed: ` + idRule + `string "a b"`},
	{"invalidConf upstream name", `{"name":"","nodes":{"a:1":1}}`, invalidConf + `property "name" validation failed: must be 1-256 characters long, got 0`},
	{"invalidConf upstream label", `{"labels":{"a":"b c"},"nodes":{"a:1":1}}`, invalidConf + `property "labels.a" validation failed: must be 1-256 characters with no white space, got "b c"`},
	{"control character in an upstream name", `{"name":"b\u0007","nodes":{"a:1":1}}`, invalidConf + `property "name" validation failed: must not contain control characters (byte 0x07 at offset 1), got "b\a"`},
}

func TestDecodeUpstreamRejects(t *testing.T) {
	for _, tc := range upstreamRejects {
		t.Run(tc.name, func(t *testing.T) {
			u, err := DecodeUpstream([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %s", asJSON(u))
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

var serviceAccepts = []struct {
	name string
	body string
	want Service
}{
	{"empty", `{}`, Service{}},
	{"every field", `{"id":2,"name":"s","desc":"d","labels":{"a":"b"},"upstream":{"nodes":{"a:1":1}},"upstream_id":"u",` +
		`"plugins":{"prometheus":{}},"hosts":["a.com","*.b.com"],"enable_websocket":true,"create_time":1,"update_time":2}`,
		Service{ID: "2", Name: "s", Desc: "d", Labels: map[string]string{"a": "b"}, Upstream: &Upstream{Nodes: Nodes{hostPort("a", 1, 1)}},
			UpstreamID: "u", Plugins: map[string]json.RawMessage{"prometheus": json.RawMessage(`{}`)},
			Hosts: []string{"a.com", "*.b.com"}, EnableWebsocket: true, CreateTime: 1, UpdateTime: 2}},
	{"empty plugins", `{"plugins":{}}`, Service{Plugins: map[string]json.RawMessage{}}},
}

func TestDecodeServiceAccepts(t *testing.T) {
	for _, tc := range serviceAccepts {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeService([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got  %s\nwant %s", asJSON(got), asJSON(&tc.want))
			}
		})
	}
}

var serviceRejects = []struct {
	name string
	body string
	want string
}{
	{"unknown field", `{"uri":"/a"}`, invalidConf + `property "uri" validation failed: unknown field (additional properties are forbidden); known fields: ` + serviceKnown},
	{"script", `{"script":"x"}`, invalidConf + `property "script" validation failed: script is not supported yet`},
	{"empty hosts", `{"hosts":[]}`, invalidConf + `property "hosts" validation failed: must have at least 1 item(s), got 0`},
	{"invalidConf hosts item", `{"hosts":["a b"]}`, invalidConf + `property "hosts" validation failed: failed to validate item 1: ` + hostRule + `"a b"`},
	{"host is a route field", `{"host":"a.com"}`, invalidConf + `property "host" validation failed: unknown field (additional properties are forbidden); known fields: ` + serviceKnown},
	{"invalidConf upstream", `{"upstream":{"nodes":{"a:0":1}}}`, invalidConf + `property "upstream.nodes" validation failed: node "a:0": port must be 1-65535`},
	{"upstream scheme", `{"upstream":{"nodes":{"a:1":1},"scheme":"kafka"}}`, invalidConf + `property "upstream.scheme" validation failed: "kafka" is not supported yet`},
	{"invalidConf upstream_id", `{"upstream_id":0}`, invalidConf + `property "upstream_id" validation failed: ` + idRule + `number 0`},
	{"plugins as a string", `{"plugins":"p"}`, invalidConf + `property "plugins" validation failed: wrong type: expected object, got string "p"`},
	{"enable_websocket as a number", `{"enable_websocket":1}`, invalidConf + `property "enable_websocket" validation failed: wrong type: expected boolean, got number 1`},
	{"invalidConf name", `{"name":""}`, invalidConf + `property "name" validation failed: must be 1-256 characters long, got 0`},
	{"invalidConf desc", `{"desc":1}`, invalidConf + `property "desc" validation failed: wrong type: expected string, got number 1`},
	{"invalidConf label", `{"labels":{"a":" "}}`, invalidConf + `property "labels.a" validation failed: must be 1-256 characters with no white space, got " "`},
	{"invalidConf id", `{"id":"é"}`, invalidConf + `property "id" validation failed: ` + idRule + `string "é"`},
	{"malformed", `{"upstream":{]}`, invalidConf + `property "upstream" validation failed: malformed JSON at line 1, column 14: invalid character ']' looking for beginning of object key string`},
}

func TestDecodeServiceRejects(t *testing.T) {
	for _, tc := range serviceRejects {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeService([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %s", asJSON(s))
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestErrorsAreObjectErrors(t *testing.T) {
	_, err := DecodeRoute([]byte(`{"uri":"/a","upstream":{"nodes":{"a:1":1},"timeout":{"connect":1,"send":1,"read":0}}}`))
	oe, ok := errors.AsType[*ObjectError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *ObjectError", err, err)
	}
	if oe.Path != "upstream.timeout.read" || oe.Reason != "must be 0.001-31536000 seconds, got 0" {
		t.Errorf("got Path %q Reason %q", oe.Path, oe.Reason)
	}
}

// TestReencodeDecodes checks that every accepted object encodes to JSON that decodes to
// the same value: what the master sends workers inside a Snapshot.
func TestReencodeDecodes(t *testing.T) {
	for _, tc := range routeAccepts {
		assertRouteRoundTrip(t, []byte(tc.body))
	}
	for _, tc := range seedBodies {
		assertRouteRoundTrip(t, []byte(tc.body))
	}
	for _, tc := range upstreamAccepts {
		u, err := DecodeUpstream([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeUpstream(mustMarshal(t, u))
		if err != nil || !reflect.DeepEqual(u, again) {
			t.Errorf("%s: got %s, %v\nwant %s", tc.name, asJSON(again), err, asJSON(u))
		}
	}
	for _, tc := range serviceAccepts {
		s, err := DecodeService([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeService(mustMarshal(t, s))
		if err != nil || !reflect.DeepEqual(s, again) {
			t.Errorf("%s: got %s, %v\nwant %s", tc.name, asJSON(again), err, asJSON(s))
		}
	}
}

func TestMarshalKeepsEmptyPluginsAndNodes(t *testing.T) {
	got := string(mustMarshal(t, &Route{URI: "/a", Plugins: map[string]json.RawMessage{}, Upstream: &Upstream{}}))
	want := `{"uri":"/a","upstream":{"nodes":[]},"plugins":{}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = string(mustMarshal(t, &Route{URI: "/a"}))
	if want := `{"uri":"/a"}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestSnapshotDecodesWithPlainUnmarshal(t *testing.T) {
	r, err := DecodeRoute([]byte(seedBodies["limit-count and prometheus"].body))
	if err != nil {
		t.Fatal(err)
	}
	snap := Snapshot{Version: 3, Routes: []Route{*r}}
	var got Snapshot
	if err := json.Unmarshal(mustMarshal(t, &snap), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, snap) {
		t.Errorf("got  %s\nwant %s", asJSON(&got), asJSON(&snap))
	}
}

func TestIDUnmarshalJSON(t *testing.T) {
	accepts := map[string]ID{`"a-Z_0.9"`: "a-Z_0.9", `1`: "1", `18446744073709551616`: "18446744073709551616", `null`: "kept"}
	for in, want := range accepts {
		id := ID("kept")
		if err := json.Unmarshal([]byte(in), &id); err != nil || id != want {
			t.Errorf("%s: got %q, %v; want %q", in, id, err, want)
		}
	}
	rejects := map[string]string{
		`""`:    `conf: id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got string ""`,
		`0`:     `conf: id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got number 0`,
		`1e3`:   `conf: id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got number 1e3`,
		`"a b"`: `conf: id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got string "a b"`,
		`{}`:    `conf: id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got object`,
	}
	for in, want := range rejects {
		var id ID
		if err := json.Unmarshal([]byte(in), &id); err == nil || err.Error() != want {
			t.Errorf("%s: got %q, %v; want error %s", in, id, err, want)
		}
	}
}

func TestParseID(t *testing.T) {
	for _, s := range []string{"1", "00000000000000000089", "a.b-c_d", strings.Repeat("z", 64)} {
		if id, err := ParseID(s); err != nil || string(id) != s {
			t.Errorf("ParseID(%q) = %q, %v", s, id, err)
		}
	}
	for _, s := range []string{"", "a/b", "a b", "é", strings.Repeat("z", 65)} {
		if id, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) = %q, want an error", s, id)
		}
	}
}

func TestNodesUnmarshalJSON(t *testing.T) {
	var got struct{ Nodes Nodes }
	if err := json.Unmarshal([]byte(`{"Nodes":{"b:2":1,"a:1":5}}`), &got); err != nil {
		t.Fatal(err)
	}
	if want := (Nodes{hostPort("a", 1, 5), hostPort("b", 2, 1)}); !reflect.DeepEqual(got.Nodes, want) {
		t.Errorf("map form: got %v, want %v", got.Nodes, want)
	}
	if err := json.Unmarshal([]byte(`{"Nodes":[{"host":"b","port":2,"weight":1},{"host":"a","weight":5}]}`), &got); err != nil {
		t.Fatal(err)
	}
	if want := (Nodes{hostPort("b", 2, 1), hostPort("a", 0, 5)}); !reflect.DeepEqual(got.Nodes, want) {
		t.Errorf("array form: got %v, want %v", got.Nodes, want)
	}
	err := json.Unmarshal([]byte(`{"Nodes":{"a:99999":1}}`), &got)
	if want := `invalid configuration: property "nodes" validation failed: node "a:99999": port must be 1-65535`; err == nil || err.Error() != want {
		t.Errorf("got error %v, want %s", err, want)
	}
}

func TestApplyDefaults(t *testing.T) {
	var u Upstream
	u.ApplyDefaults()
	want := Upstream{Type: "roundrobin", Scheme: "http", PassHost: "pass", KeepalivePool: &KeepalivePool{Size: 320, IdleTimeout: 60, Requests: 1000},
		Timeout: &Timeout{Connect: 60, Send: 60, Read: 60}}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("empty upstream: got %s, want %s", asJSON(&u), asJSON(&want))
	}

	set := Upstream{Type: "roundrobin", Scheme: "http", PassHost: "node", KeepalivePool: &KeepalivePool{Size: 1, IdleTimeout: 0, Requests: 2},
		Timeout: &Timeout{Connect: 1, Send: 2, Read: 3}}
	got := set
	got.KeepalivePool = ptrTo(*set.KeepalivePool)
	got.ApplyDefaults()
	if !reflect.DeepEqual(got, set) || got.Retries != nil {
		t.Errorf("set upstream: got %s, want %s", asJSON(&got), asJSON(&set))
	}

	partial := Upstream{KeepalivePool: &KeepalivePool{IdleTimeout: 5}}
	partial.ApplyDefaults()
	if want := (KeepalivePool{Size: 320, IdleTimeout: 5, Requests: 1000}); *partial.KeepalivePool != want {
		t.Errorf("partial pool: got %+v, want %+v", *partial.KeepalivePool, want)
	}

	var none *Upstream
	none.ApplyDefaults() // must not panic
}

func TestRouteEnabled(t *testing.T) {
	for _, tc := range []struct {
		status *int
		want   bool
	}{{nil, true}, {ptrTo(1), true}, {ptrTo(0), false}} {
		if got := (&Route{Status: tc.status}).Enabled(); got != tc.want {
			t.Errorf("status %v: Enabled() = %v", tc.status, got)
		}
	}
}

func TestRoutePaths(t *testing.T) {
	if got := (&Route{URI: "/a"}).Paths(); !reflect.DeepEqual(got, []string{"/a"}) {
		t.Errorf("uri: got %q", got)
	}
	if got := (&Route{URIs: []string{"/a", "/b"}}).Paths(); !reflect.DeepEqual(got, []string{"/a", "/b"}) {
		t.Errorf("uris: got %q", got)
	}
}

// FuzzDecodeRoute checks that no input panics the decoder, that every rejection is an
// *ObjectError, and that an accepted route encodes to JSON that decodes to the same route.
func FuzzDecodeRoute(f *testing.F) {
	for _, tc := range seedBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := DecodeRoute(data)
		if err != nil {
			_, object := errors.AsType[*ObjectError](err)
			_, vars := errors.AsType[*VarsError](err)
			if !object && !vars {
				t.Fatalf("error %v is %T, not *ObjectError or *VarsError", err, err)
			}
			return
		}
		assertRouteRoundTrip(t, data)
	})
}

func assertRouteRoundTrip(t *testing.T, body []byte) {
	t.Helper()
	r, err := DecodeRoute(body)
	if err != nil {
		t.Fatal(err)
	}
	encoded := mustMarshal(t, r)
	again, err := DecodeRoute(encoded)
	if err != nil {
		t.Fatalf("%s\nre-encoded as %s\nno longer decodes: %v", body, encoded, err)
	}
	if !reflect.DeepEqual(r, again) {
		t.Fatalf("%s\nre-encoded as %s\ndecodes to %s\nnot %s", body, encoded, asJSON(again), asJSON(r))
	}
}

func BenchmarkDecodeRoute(b *testing.B) {
	body := []byte(seedBodies["limit-count and prometheus"].body)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRoute(body); err != nil {
			b.Fatal(err)
		}
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func asJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err.Error()
	}
	return strings.TrimSpace(buf.String())
}
