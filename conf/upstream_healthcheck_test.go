package conf

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// withChecks wraps a "checks" body in an upstream of two nodes.
func withChecks(checks string) string {
	return `{"nodes":{"a:1":1,"b:1":1},"checks":` + checks + `}`
}

func activeDefaults() *ActiveCheck {
	return &ActiveCheck{
		Type: "http", Timeout: 1, Concurrency: 10, HTTPMethod: "GET", HTTPPath: "/", HTTPSVerifyCertificate: true,
		Healthy:   ActiveHealthyRule{Interval: 1, HTTPStatuses: []int{200, 302}, Successes: 2},
		Unhealthy: ActiveUnhealthyRule{Interval: 1, HTTPStatuses: []int{429, 404, 500, 501, 502, 503, 504, 505}, HTTPFailures: 5, TCPFailures: 2, Timeouts: 3},
	}
}

func passiveDefaults() *PassiveCheck {
	return &PassiveCheck{
		Type: "http",
		Healthy: PassiveHealthyRule{HTTPStatuses: []int{200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
			300, 301, 302, 303, 304, 305, 306, 307, 308}, Successes: 5},
		Unhealthy: PassiveUnhealthyRule{HTTPStatuses: []int{429, 500, 503}, HTTPFailures: 5, TCPFailures: 2, Timeouts: 7},
	}
}

func TestDecodeHealthChecksAccepts(t *testing.T) {
	tests := []struct {
		name   string
		checks string
		want   func() *HealthChecks
	}{
		{"empty active gets every default", `{"active":{}}`, func() *HealthChecks {
			return &HealthChecks{Active: activeDefaults()}
		}},
		{"empty passive gets every default", `{"active":{},"passive":{}}`, func() *HealthChecks {
			return &HealthChecks{Active: activeDefaults(), Passive: passiveDefaults()}
		}},
		{"empty rules get their defaults", `{"active":{"healthy":{},"unhealthy":{}},"passive":{"healthy":{},"unhealthy":{}}}`, func() *HealthChecks {
			return &HealthChecks{Active: activeDefaults(), Passive: passiveDefaults()}
		}},
		{"every active field", `{"active":{"type":"https","timeout":0.5,"concurrency":3,"host":"example.com","port":8080,` +
			`"http_method":"HEAD","http_path":"/status?x=1","http_req_body":"ping","https_verify_certificate":false,` +
			`"req_headers":["X-A: 1","X-B:two"],"healthy":{"interval":3,"http_statuses":[200],"successes":1},` +
			`"unhealthy":{"interval":4,"http_statuses":[500,599],"http_failures":254,"tcp_failures":1,"timeouts":9}}}`,
			func() *HealthChecks {
				return &HealthChecks{Active: &ActiveCheck{
					Type: "https", Timeout: 0.5, Concurrency: 3, Host: "example.com", Port: 8080, HTTPMethod: "HEAD",
					HTTPPath: "/status?x=1", HTTPReqBody: "ping", HTTPSVerifyCertificate: false,
					ReqHeaders: []string{"X-A: 1", "X-B:two"},
					Healthy:    ActiveHealthyRule{Interval: 3, HTTPStatuses: []int{200}, Successes: 1},
					Unhealthy:  ActiveUnhealthyRule{Interval: 4, HTTPStatuses: []int{500, 599}, HTTPFailures: 254, TCPFailures: 1, Timeouts: 9},
				}}
			}},
		{"one member of a rule keeps the others' defaults", `{"active":{"healthy":{"successes":7},"unhealthy":{"tcp_failures":1}}}`, func() *HealthChecks {
			a := activeDefaults()
			a.Healthy.Successes = 7
			a.Unhealthy.TCPFailures = 1
			return &HealthChecks{Active: a}
		}},
		{"tcp probes", `{"active":{"type":"tcp"}}`, func() *HealthChecks {
			a := activeDefaults()
			a.Type = "tcp"
			return &HealthChecks{Active: a}
		}},
		{"every passive field, 0 turns counting off", `{"active":{},"passive":{"type":"tcp","healthy":{"http_statuses":[200],"successes":0},` +
			`"unhealthy":{"http_statuses":[502],"http_failures":0,"tcp_failures":0,"timeouts":254}}}`, func() *HealthChecks {
			return &HealthChecks{Active: activeDefaults(), Passive: &PassiveCheck{
				Type:      "tcp",
				Healthy:   PassiveHealthyRule{HTTPStatuses: []int{200}, Successes: 0},
				Unhealthy: PassiveUnhealthyRule{HTTPStatuses: []int{502}, HTTPFailures: 0, TCPFailures: 0, Timeouts: 254},
			}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := DecodeUpstream([]byte(withChecks(tc.checks)))
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want(); !reflect.DeepEqual(u.Checks, want) {
				t.Errorf("got  %s\nwant %s", asJSON(u.Checks), asJSON(want))
			}
			// What the master sends workers decodes with plain encoding/json to the same.
			var again Upstream
			if err := json.Unmarshal(mustMarshal(t, u), &again); err != nil || !reflect.DeepEqual(u.Checks, again.Checks) {
				t.Errorf("round trip: got %s, %v", asJSON(again.Checks), err)
			}
			// And it is still a valid upstream for the Admin API.
			if _, err := DecodeUpstream(mustMarshal(t, u)); err != nil {
				t.Errorf("re-decoding: %v", err)
			}
		})
	}
}

func TestDecodeHealthChecksDefaultsAreNotShared(t *testing.T) {
	u, err := DecodeUpstream([]byte(withChecks(`{"active":{},"passive":{}}`)))
	if err != nil {
		t.Fatal(err)
	}
	u.Checks.Active.Healthy.HTTPStatuses[0] = 999
	u.Checks.Active.Unhealthy.HTTPStatuses[0] = 999
	u.Checks.Passive.Healthy.HTTPStatuses[0] = 999
	u.Checks.Passive.Unhealthy.HTTPStatuses[0] = 999
	again, err := DecodeUpstream([]byte(withChecks(`{"active":{},"passive":{}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Checks, &HealthChecks{Active: activeDefaults(), Passive: passiveDefaults()}) {
		t.Errorf("a decoded value's slices alias the defaults: %s", asJSON(again.Checks))
	}
}

func TestDecodeHealthChecksRejects(t *testing.T) {
	tests := []struct {
		name, checks, path, reason string
	}{
		{"not an object", `[]`, "checks", "wrong type: expected object, got array"},
		{"no active", `{}`, "checks.active", "is required"},
		{"passive alone", `{"passive":{}}`, "checks.active", "is required: passive checks only take nodes out, active checks bring them back"},
		{"unknown member", `{"active":{},"extra":1}`, "checks.extra", "unknown field (additional properties are forbidden); known fields: active, passive"},
		{"active not an object", `{"active":1}`, "checks.active", "wrong type: expected object, got number 1"},
		{"active unknown member", `{"active":{"interval":1}}`, "checks.active.interval", "unknown field (additional properties are forbidden); known fields: concurrency, healthy, host, http_method, http_path, http_req_body, https_verify_certificate, port, req_headers, timeout, type, unhealthy"},
		{"active type", `{"active":{"type":"udp"}}`, "checks.active.type", `matches none of the enum values (http, https, tcp), got "udp"`},
		{"active type not a string", `{"active":{"type":1}}`, "checks.active.type", "wrong type: expected string, got number 1"},
		{"timeout 0", `{"active":{"timeout":0}}`, "checks.active.timeout", "must be 0.001-31536000 seconds, got 0"},
		{"timeout a string", `{"active":{"timeout":"1"}}`, "checks.active.timeout", `wrong type: expected number, got string "1"`},
		{"concurrency 0", `{"active":{"concurrency":0}}`, "checks.active.concurrency", "must be >= 1, got 0"},
		{"concurrency fraction", `{"active":{"concurrency":1.5}}`, "checks.active.concurrency", "wrong type: expected integer, got number 1.5"},
		{"host with a space", `{"active":{"host":"a b"}}`, "checks.active.host", hostRule + `"a b"`},
		{"port 0", `{"active":{"port":0}}`, "checks.active.port", "must be 1-65535, got 0"},
		{"port too big", `{"active":{"port":65536}}`, "checks.active.port", "must be 1-65535, got 65536"},
		{"method lower case", `{"active":{"http_method":"get"}}`, "checks.active.http_method", `matches none of the enum values (GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS, CONNECT, TRACE, PURGE), got "get"`},
		{"path without slash", `{"active":{"http_path":"status"}}`, "checks.active.http_path", `must start with '/', got "status"`},
		{"empty path", `{"active":{"http_path":""}}`, "checks.active.http_path", `must start with '/', got ""`},
		{"path with a space", `{"active":{"http_path":"/a b"}}`, "checks.active.http_path", `must not contain spaces or control characters, got "/a b"`},
		{"body not a string", `{"active":{"http_req_body":{}}}`, "checks.active.http_req_body", "wrong type: expected string, got object"},
		{"verify not a boolean", `{"active":{"https_verify_certificate":"yes"}}`, "checks.active.https_verify_certificate", `wrong type: expected boolean, got string "yes"`},
		{"req_headers empty", `{"active":{"req_headers":[]}}`, "checks.active.req_headers", "must have at least 1 item(s), got 0"},
		{"req_headers not a list", `{"active":{"req_headers":"X-A: 1"}}`, "checks.active.req_headers", `wrong type: expected array, got string "X-A: 1"`},
		{"req_headers without colon", `{"active":{"req_headers":["X-A 1"]}}`, "checks.active.req_headers", `failed to validate item 1: must be "Name: value" with a name of letters, digits, '-' and '_', got "X-A 1"`},
		{"req_headers without name", `{"active":{"req_headers":[": 1"]}}`, "checks.active.req_headers", `failed to validate item 1: must be "Name: value" with a name of letters, digits, '-' and '_', got ": 1"`},
		{"req_headers bad name", `{"active":{"req_headers":["X A: 1"]}}`, "checks.active.req_headers", `failed to validate item 1: must be "Name: value" with a name of letters, digits, '-' and '_', got "X A: 1"`},
		{"req_headers control character", `{"active":{"req_headers":["X-A: 1\r\nX-B: 2"]}}`, "checks.active.req_headers", `failed to validate item 1: header value must not contain control characters, got "X-A: 1\r\nX-B: 2"`},
		{"req_headers duplicate", `{"active":{"req_headers":["X-A: 1","X-A: 1"]}}`, "checks.active.req_headers", "expected unique items but items 1 and 2 are equal"},
		{"healthy not an object", `{"active":{"healthy":[]}}`, "checks.active.healthy", "wrong type: expected object, got array"},
		{"healthy unknown member", `{"active":{"healthy":{"timeouts":1}}}`, "checks.active.healthy.timeouts", "unknown field (additional properties are forbidden); known fields: http_statuses, interval, successes"},
		{"healthy interval 0", `{"active":{"healthy":{"interval":0}}}`, "checks.active.healthy.interval", "must be 1-31536000, got 0"},
		{"healthy interval fraction", `{"active":{"healthy":{"interval":0.5}}}`, "checks.active.healthy.interval", "wrong type: expected integer, got number 0.5"},
		{"healthy successes 0", `{"active":{"healthy":{"successes":0}}}`, "checks.active.healthy.successes", "must be 1-254, got 0"},
		{"healthy successes 255", `{"active":{"healthy":{"successes":255}}}`, "checks.active.healthy.successes", "must be 1-254, got 255"},
		{"statuses empty", `{"active":{"healthy":{"http_statuses":[]}}}`, "checks.active.healthy.http_statuses", "must have at least 1 item(s), got 0"},
		{"statuses not a list", `{"active":{"healthy":{"http_statuses":200}}}`, "checks.active.healthy.http_statuses", "wrong type: expected array, got number 200"},
		{"status 199", `{"active":{"healthy":{"http_statuses":[200,199]}}}`, "checks.active.healthy.http_statuses", "failed to validate item 2: must be 200-599, got 199"},
		{"status 600", `{"active":{"unhealthy":{"http_statuses":[600]}}}`, "checks.active.unhealthy.http_statuses", "failed to validate item 1: must be 200-599, got 600"},
		{"status a string", `{"active":{"unhealthy":{"http_statuses":["500"]}}}`, "checks.active.unhealthy.http_statuses", `failed to validate item 1: wrong type: expected integer, got string "500"`},
		{"statuses duplicate", `{"active":{"unhealthy":{"http_statuses":[500,502,500]}}}`, "checks.active.unhealthy.http_statuses", "expected unique items but items 1 and 3 are equal"},
		{"unhealthy unknown member", `{"active":{"unhealthy":{"successes":1}}}`, "checks.active.unhealthy.successes", "unknown field (additional properties are forbidden); known fields: http_failures, http_statuses, interval, tcp_failures, timeouts"},
		{"unhealthy interval 0", `{"active":{"unhealthy":{"interval":0}}}`, "checks.active.unhealthy.interval", "must be 1-31536000, got 0"},
		{"active http_failures 0", `{"active":{"unhealthy":{"http_failures":0}}}`, "checks.active.unhealthy.http_failures", "must be 1-254, got 0"},
		{"active tcp_failures 255", `{"active":{"unhealthy":{"tcp_failures":255}}}`, "checks.active.unhealthy.tcp_failures", "must be 1-254, got 255"},
		{"active timeouts 0", `{"active":{"unhealthy":{"timeouts":0}}}`, "checks.active.unhealthy.timeouts", "must be 1-254, got 0"},
		{"passive not an object", `{"active":{},"passive":true}`, "checks.passive", "wrong type: expected object, got boolean true"},
		{"passive unknown member", `{"active":{},"passive":{"timeout":1}}`, "checks.passive.timeout", "unknown field (additional properties are forbidden); known fields: healthy, type, unhealthy"},
		{"passive type", `{"active":{},"passive":{"type":"grpc"}}`, "checks.passive.type", `matches none of the enum values (http, https, tcp), got "grpc"`},
		{"passive healthy unknown member", `{"active":{},"passive":{"healthy":{"interval":1}}}`, "checks.passive.healthy.interval", "unknown field (additional properties are forbidden); known fields: http_statuses, successes"},
		{"passive successes -1", `{"active":{},"passive":{"healthy":{"successes":-1}}}`, "checks.passive.healthy.successes", "must be 0-254, got -1"},
		{"passive successes 255", `{"active":{},"passive":{"healthy":{"successes":255}}}`, "checks.passive.healthy.successes", "must be 0-254, got 255"},
		{"passive statuses empty", `{"active":{},"passive":{"healthy":{"http_statuses":[]}}}`, "checks.passive.healthy.http_statuses", "must have at least 1 item(s), got 0"},
		{"passive unhealthy unknown member", `{"active":{},"passive":{"unhealthy":{"interval":1}}}`, "checks.passive.unhealthy.interval", "unknown field (additional properties are forbidden); known fields: http_failures, http_statuses, tcp_failures, timeouts"},
		{"passive unhealthy status 100", `{"active":{},"passive":{"unhealthy":{"http_statuses":[100]}}}`, "checks.passive.unhealthy.http_statuses", "failed to validate item 1: must be 200-599, got 100"},
		{"passive http_failures 255", `{"active":{},"passive":{"unhealthy":{"http_failures":255}}}`, "checks.passive.unhealthy.http_failures", "must be 0-254, got 255"},
		{"passive tcp_failures -1", `{"active":{},"passive":{"unhealthy":{"tcp_failures":-1}}}`, "checks.passive.unhealthy.tcp_failures", "must be 0-254, got -1"},
		{"passive timeouts a string", `{"active":{},"passive":{"unhealthy":{"timeouts":"7"}}}`, "checks.passive.unhealthy.timeouts", `wrong type: expected integer, got string "7"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := DecodeUpstream([]byte(withChecks(tc.checks)))
			if err == nil {
				t.Fatalf("accepted: %s", asJSON(u))
			}
			want := &ObjectError{Path: tc.path, Reason: tc.reason}
			if err.Error() != want.Error() {
				t.Errorf("error\n got %s\nwant %s", err, want)
			}
		})
	}
}

func TestInlineUpstreamChecksPaths(t *testing.T) {
	_, err := DecodeRoute([]byte(`{"uri":"/a","upstream":` + withChecks(`{"active":{"timeout":-1}}`) + `}`))
	if err == nil || !strings.Contains(err.Error(), `property "upstream.checks.active.timeout" validation failed: must be 0.001-31536000 seconds, got -1`) {
		t.Errorf("route: got %v", err)
	}
	_, err = DecodeService([]byte(`{"upstream":` + withChecks(`{"passive":{}}`) + `}`))
	if err == nil || !strings.Contains(err.Error(), `property "upstream.checks.active" validation failed`) {
		t.Errorf("service: got %v", err)
	}
}

func TestCheckedUpstreams(t *testing.T) {
	checked := func(nodes string) *Upstream {
		u, err := DecodeUpstream([]byte(`{"nodes":` + nodes + `,"checks":{"active":{}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	two := `{"a:1":1,"b:2":1}`
	one := `{"a:1":1}`
	u1 := checked(two)
	u1.ID = "1"
	u2 := checked(one) // one node: never checked
	u2.ID = "2"
	u3 := Upstream{ID: "3", Nodes: Nodes{hostPort("a", 1, 1), hostPort("b", 1, 1)}} // no checks
	snap := &Snapshot{
		Upstreams: []Upstream{*u1, *u2, u3},
		Services:  []Service{{ID: "s1", Upstream: checked(two)}, {ID: "s2", UpstreamID: "1"}},
		Routes:    []Route{{ID: "r1", Upstream: checked(two)}, {ID: "r2", Upstream: checked(one)}, {ID: "r3", UpstreamID: "1"}},
	}
	var names []string
	for _, c := range snap.CheckedUpstreams() {
		names = append(names, c.Name)
	}
	want := []string{"/apisix/upstreams/1", "/apisix/services/s1", "/apisix/routes/r1"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("got %q, want %q", names, want)
	}
}

func TestNodeAddress(t *testing.T) {
	tests := []struct {
		scheme string
		node   Node
		want   string
	}{
		{"http", Node{Host: "10.0.0.1", Port: 8080}, "10.0.0.1:8080"},
		{"", Node{Host: "a.example"}, "a.example:80"},
		{"http", Node{Host: "a.example"}, "a.example:80"},
		{"https", Node{Host: "a.example"}, "a.example:443"},
		{"http", Node{Host: "::1", Port: 1}, "[::1]:1"},
	}
	for _, tc := range tests {
		u := &Upstream{Scheme: tc.scheme}
		if got := u.NodeAddress(&tc.node); got != tc.want {
			t.Errorf("%s %+v: got %q, want %q", tc.scheme, tc.node, got, tc.want)
		}
	}
}
