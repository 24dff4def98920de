package plugins

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
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
	if race.Enabled {
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

// namer is a test auth plugin: it names the consumer its configuration holds.
type namer struct {
	consumer string
	trace    *[]string
}

func (n *namer) Access(c *Ctx) bool {
	*n.trace = append(*n.trace, "access:namer")
	c.Consumer = n.consumer
	return false
}

// TestConsumerChainTakesOver: once a plugin names a consumer with a merged chain, the
// merged chain's plugins after the namer run (the consumer's version of a plugin instead
// of the route's), and its log phase replaces the route chain's; another consumer, or a
// chain without merged chains, runs as before.
func TestConsumerChainTakesOver(t *testing.T) {
	var trace []string
	registerRecorder(t, "test-c-high", 3000, &trace)
	registerRecorder(t, "test-c-low", 10, &trace)
	registerRecorder(t, "test-c-extra", 500, &trace)
	Register(Plugin{Name: "test-c-auth", Priority: 2500, Auth: true,
		Validate: func(json.RawMessage) error { return nil },
		Build: func(raw json.RawMessage, env *Env) (any, error) {
			var name string
			err := json.Unmarshal(raw, &name)
			return &namer{consumer: name, trace: &trace}, err
		}})
	build := func(set map[string]string) *Chain {
		raw := map[string]json.RawMessage{}
		for k, v := range set {
			raw[k] = json.RawMessage(v)
		}
		ch, err := BuildChain(raw, &Env{})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	route := map[string]string{"test-c-high": `{}`, "test-c-auth": `"jack"`, "test-c-low": `{}`}
	ch := build(route)
	ch.SetConsumerChains(map[string]*Chain{
		"jack": build(map[string]string{"test-c-high": `{}`, "test-c-auth": `"jack"`, "test-c-low": `"answer"`, "test-c-extra": `{}`}),
	})
	run := func(ch *Chain) (bool, string) {
		trace = trace[:0]
		var req fasthttp.RequestCtx
		c := AcquireCtx(&req, &RouteInfo{ID: "1"}, 0)
		answered := ch.Access(c)
		ch.Log(c)
		ReleaseCtx(c)
		return answered, strings.Join(trace, " ")
	}
	answered, got := run(ch)
	want := "access:test-c-high access:namer access:test-c-extra access:test-c-low log:test-c-high log:test-c-extra log:test-c-low"
	if !answered || got != want {
		t.Errorf("jack: answered=%v trace %q, want true and %q", answered, got, want)
	}

	route["test-c-auth"] = `"rose"`
	ch = build(route)
	ch.SetConsumerChains(map[string]*Chain{"jack": build(map[string]string{"test-c-extra": `{}`})})
	answered, got = run(ch)
	want = "access:test-c-high access:namer access:test-c-low log:test-c-high log:test-c-low"
	if answered || got != want {
		t.Errorf("rose: answered=%v trace %q, want false and %q", answered, got, want)
	}
}
