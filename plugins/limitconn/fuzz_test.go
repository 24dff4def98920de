package limitconn

import (
	"encoding/json"
	"testing"
	"time"

	"gw/plugins"
	"gw/shm"
)

// Whatever the Admin API accepts is served: a configuration Parse accepts builds, and
// its instance takes and gives back places without panicking or leaking one.
func FuzzParseBuildServe(f *testing.F) {
	for _, seed := range []string{
		`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`,
		`{"conn": 65535, "burst": 0, "default_conn_delay": 86400, "key_type": "var_combination", "key": "$remote_addr $http_x"}`,
		`{"conn": 2, "burst": 3, "default_conn_delay": 1e-300, "key": "", "only_use_default_delay": true}`,
	} {
		f.Add([]byte(seed))
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := Parse(raw); err != nil {
			return
		}
		env := &plugins.Env{Route: &plugins.RouteInfo{ID: "1"}, Shared: &plugins.Shared{Segments: map[string]*shm.Segment{Name: fx.seg}}}
		instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
		if err != nil {
			t.Fatalf("Parse accepts %s, Build refuses it: %v", raw, err)
		}
		l, ok := instance.(*limiter)
		if !ok {
			return // disabled, or a redis policy (redis_test.go serves those against a real Redis)
		}
		l.sleep = func(time.Duration) {}
		var held []*request
		for i := 0; i < 3; i++ {
			code, body, r := begin(l, "10.0.0.1")
			// The table has room for every key the fuzzer makes: never full.
			if code != 200 && code != l.rejectedCode {
				t.Fatalf("%s: answered %d %s", raw, code, body)
			}
			held = append(held, r)
		}
		for _, r := range held {
			r.end(l)
		}
		if n := fx.inFlight(l, "10.0.0.1"); n != 0 {
			t.Fatalf("%s: %d in flight after every request ended", raw, n)
		}
	})
}
