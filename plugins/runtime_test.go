package plugins

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// recorder is a test plugin that notes the order its phases run in.
type recorder struct {
	name   string
	answer bool
	trace  *[]string
}

func (r *recorder) Access(c *Ctx) bool {
	*r.trace = append(*r.trace, "access:"+r.name)
	c.AddResponseHeader([]byte("X-"+r.name), []byte("1"))
	return r.answer
}

func (r *recorder) Log(c *Ctx) { *r.trace = append(*r.trace, "log:"+r.name) }

func registerRecorder(t *testing.T, name string, priority int, trace *[]string) {
	t.Helper()
	Register(Plugin{
		Name: name, Priority: priority,
		Validate: func(json.RawMessage) error { return nil },
		Build: func(raw json.RawMessage, env *Env) (any, error) {
			return &recorder{name: name, answer: string(raw) == `"answer"`, trace: trace}, nil
		},
	})
}

func TestChainRunsByPriorityAndStopsWhenAnswered(t *testing.T) {
	var trace []string
	registerRecorder(t, "test-low", 10, &trace)
	registerRecorder(t, "test-high", 3000, &trace)
	registerRecorder(t, "test-mid", 1000, &trace)

	ch, err := BuildChain(map[string]json.RawMessage{
		"test-low": json.RawMessage(`{}`), "test-high": json.RawMessage(`{}`), "test-mid": json.RawMessage(`"answer"`),
	}, &Env{})
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.RequestCtx
	c := AcquireCtx(&req, &RouteInfo{ID: "1"}, 0)
	answered := ch.Access(c)
	c.ApplyResponseHeaders()
	ch.Log(c)
	got := strings.Join(trace, " ")
	want := "access:test-high access:test-mid log:test-high log:test-mid log:test-low"
	if !answered || got != want {
		t.Fatalf("answered=%v trace %q, want %q", answered, got, want)
	}
	if string(req.Response.Header.Peek("X-test-high")) != "1" || string(req.Response.Header.Peek("X-test-mid")) != "1" {
		t.Fatalf("queued headers not applied: %s", req.Response.Header.String())
	}
	ReleaseCtx(c)

	if _, err := BuildChain(map[string]json.RawMessage{"no-such-plugin": nil}, &Env{}); err == nil {
		t.Fatal("unknown plugin built")
	}
}

func TestCtxReuseAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	var req fasthttp.RequestCtx
	route := &RouteInfo{ID: "1"}
	name, value := []byte("X-RateLimit-Remaining"), []byte("99")
	allocs := testing.AllocsPerRun(1000, func() {
		c := AcquireCtx(&req, route, 0)
		c.AddResponseHeader(name, value)
		c.ApplyResponseHeaders()
		ReleaseCtx(c)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
}
