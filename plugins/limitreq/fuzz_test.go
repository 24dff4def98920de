package limitreq

import (
	"encoding/json"
	"testing"
	"time"

	"gw/plugins"
	"gw/shm"
)

// Whatever the Admin API accepts is served: a configuration Parse accepts builds, and
// its instance answers a request without panicking.
func FuzzParseBuildServe(f *testing.F) {
	for _, seed := range []string{
		`{"rate": 1, "burst": 0, "key": "remote_addr"}`,
		`{"rate": 0.1, "burst": 0.1, "key_type": "var_combination", "key": "$remote_addr $http_x_user", "nodelay": true}`,
		`{"rate": 10000000, "burst": 1e9, "key": "", "rejected_code": 599, "rejected_msg": "x"}`,
		`{"rate": 1e-300, "burst": 0, "key": "remote_addr"}`,
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
		for i := 0; i < 3; i++ {
			if code, _ := do(l, "10.0.0.1"); code != 200 && code != l.rejectedCode {
				t.Fatalf("%s: answered %d", raw, code)
			}
		}
		if l.interval == 0 || l.interval > maxBucketTicks || l.limit > maxBucketTicks {
			t.Fatalf("%s: interval %d and limit %d ticks out of the payload's range", raw, l.interval, l.limit)
		}
	})
}
