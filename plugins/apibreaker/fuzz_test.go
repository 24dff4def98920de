package apibreaker

import (
	"encoding/json"
	"testing"

	"gw/plugins"
	"gw/shm"
)

// Whatever the Admin API accepts is served: a configuration Parse accepts builds, and
// its instance counts and breaks without panicking.
func FuzzParseBuildServe(f *testing.F) {
	for _, seed := range []string{
		`{"break_response_code": 502}`,
		test9,
		`{"break_response_code": 599, "break_response_body": "x", "break_response_headers": [{"key": "X", "value": "$uri"}],
			"max_breaker_sec": 3, "unhealthy": {"failures": 1}}`,
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
		b, ok := instance.(*breaker)
		if !ok {
			return // disabled
		}
		b.now = fx.clock.Load
		for _, upstream := range []int{500, 503, 500, 500, 200, 200, 200, 200} {
			if r := do(b, "/f", upstream); r.status != upstream && r.status != b.code {
				t.Fatalf("%s: answered %d for the upstream's %d", raw, r.status, upstream)
			}
		}
	})
}
