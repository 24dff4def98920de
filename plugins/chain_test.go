package plugins

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
)

// testPlugin is a plugin made of a function, for tests of the registry and the chain.
type testPlugin struct {
	name     string
	priority int
	build    func(raw json.RawMessage, env *Env) (any, error)
}

func (p *testPlugin) Name() string                   { return p.name }
func (p *testPlugin) Priority() int                  { return p.priority }
func (p *testPlugin) Validate(json.RawMessage) error { return nil }
func (p *testPlugin) Build(raw json.RawMessage, env *Env) (any, error) {
	if p.build == nil {
		return nil, nil
	}
	return p.build(raw, env)
}

// testAuth is a test authentication plugin.
type testAuth struct {
	testPlugin
	secrets []string
}

func (*testAuth) ValidateConsumer(json.RawMessage) error { return nil }
func (*testAuth) CredentialField() string                { return "key" }
func (a *testAuth) SecretFields() []string               { return a.secrets }

var (
	_ Plugin       = (*testPlugin)(nil)
	_ ConsumerAuth = (*testAuth)(nil)
)

// recorder is a test plugin's instance that notes the order its phases run in.
type recorder struct {
	name   string
	answer bool
	fail   error
	trace  *[]string
}

var answerBody = []byte("answered")

func (r *recorder) Access(c *Ctx) error {
	*r.trace = append(*r.trace, "access:"+r.name)
	c.AddResponseHeader([]byte("X-"+r.name), []byte("1"))
	if r.answer {
		c.Respond(fasthttp.StatusTooManyRequests, nil, answerBody)
	}
	return r.fail
}

func (r *recorder) Log(c *Ctx) { *r.trace = append(*r.trace, "log:"+r.name) }

var errTestFault = errors.New("the table is gone")

// registerRecorder registers a plugin whose instance answers when configured "answer"
// and fails when configured "fail".
func registerRecorder(t *testing.T, name string, priority int, trace *[]string) {
	t.Helper()
	Register(&testPlugin{name: name, priority: priority, build: func(raw json.RawMessage, env *Env) (any, error) {
		r := &recorder{name: name, answer: string(raw) == `"answer"`, trace: trace}
		if string(raw) == `"fail"` {
			r.fail = errTestFault
		}
		return r, nil
	}})
}

func raws(set map[string]string) map[string]json.RawMessage {
	raw := map[string]json.RawMessage{}
	for k, v := range set {
		raw[k] = json.RawMessage(v)
	}
	return raw
}

func TestChainRunsByPriorityAndStopsWhenAnswered(t *testing.T) {
	var trace []string
	registerRecorder(t, "test-low", 10, &trace)
	registerRecorder(t, "test-high", 3000, &trace)
	registerRecorder(t, "test-mid", 1000, &trace)

	ch, err := BuildChain(raws(map[string]string{"test-low": `{}`, "test-high": `{}`, "test-mid": `"answer"`}), &Env{})
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.RequestCtx
	c := AcquireCtx(&req, &RouteInfo{ID: "1"}, 0)
	err = ch.Access(c)
	c.ApplyResponseHeaders()
	ch.Log(c)
	got := strings.Join(trace, " ")
	want := "access:test-high access:test-mid log:test-high log:test-mid log:test-low"
	if err != nil || !c.Answered() || got != want {
		t.Fatalf("err %v, answered %v, trace %q; want answered and %q", err, c.Answered(), got, want)
	}
	if req.Response.StatusCode() != fasthttp.StatusTooManyRequests || string(req.Response.Body()) != "answered" {
		t.Fatalf("response %d %q, want the plugin's answer", req.Response.StatusCode(), req.Response.Body())
	}
	if string(req.Response.Header.Peek("X-test-high")) != "1" || string(req.Response.Header.Peek("X-test-mid")) != "1" {
		t.Fatalf("queued headers not applied: %s", req.Response.Header.String())
	}
	ReleaseCtx(c)
	if c.Answered() {
		t.Fatal("a released Ctx still reads as answered")
	}

	if _, err := BuildChain(map[string]json.RawMessage{"no-such-plugin": nil}, &Env{}); err == nil {
		t.Fatal("unknown plugin built")
	}
}

// A fault stops the access phase and comes back naming its plugin; the response is left
// for the worker to write.
func TestAccessFaultNamesThePlugin(t *testing.T) {
	var trace []string
	registerRecorder(t, "test-f-high", 3000, &trace)
	registerRecorder(t, "test-f-low", 10, &trace)
	ch, err := BuildChain(raws(map[string]string{"test-f-high": `"fail"`, "test-f-low": `{}`}), &Env{})
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.RequestCtx
	c := AcquireCtx(&req, &RouteInfo{}, 0)
	defer ReleaseCtx(c)
	err = ch.Access(c)
	var fault *PluginError
	if !errors.As(err, &fault) || fault.Plugin != "test-f-high" || !errors.Is(err, errTestFault) {
		t.Fatalf("Access = %v, want test-f-high's fault", err)
	}
	if got := strings.Join(trace, " "); got != "access:test-f-high" {
		t.Fatalf("trace %q: the plugins after the fault ran", got)
	}
	if err.Error() != "plugin test-f-high: the table is gone" {
		t.Errorf("error %q", err)
	}
}

// An instance that implements no phase is a build error, never dropped; a nil instance
// (the plugin is off on the route) builds nothing, without error.
func TestBuildRefusesAnInstanceWithoutPhase(t *testing.T) {
	Register(&testPlugin{name: "test-phaseless", build: func(raw json.RawMessage, env *Env) (any, error) {
		if string(raw) == `"off"` {
			return nil, nil
		}
		return struct{}{}, nil
	}})
	_, err := BuildChain(raws(map[string]string{"test-phaseless": `{}`}), &Env{})
	if err == nil || !strings.Contains(err.Error(), "runs in no phase") {
		t.Fatalf("BuildChain = %v, want the phaseless instance refused", err)
	}
	ch, err := BuildChain(raws(map[string]string{"test-phaseless": `"off"`}), &Env{})
	if err != nil || !ch.Empty() {
		t.Fatalf("BuildChain of a plugin turned off = %v, %v; want an empty chain", ch, err)
	}
}

func TestRegisterRefuses(t *testing.T) {
	Register(&testPlugin{name: "test-taken"})
	RegisterSegment("test-host-segment", &SegmentSpec{Size: func(*conf.Config) int { return 8 }})
	for _, tc := range []struct {
		name     string
		register func()
	}{
		{"a nil plugin", func() { Register(nil) }},
		{"an empty name", func() { Register(&testPlugin{}) }},
		{"a duplicate", func() { Register(&testPlugin{name: "test-taken"}) }},
		{"a host segment's name", func() { Register(&testPlugin{name: "test-host-segment"}) }},
		{"a segment without its spec", func() { Register(&testOwner{testPlugin{name: "test-no-spec"}, nil}) }},
		{"a host segment named as a plugin", func() { RegisterSegment("test-taken", &SegmentSpec{Size: func(*conf.Config) int { return 8 }}) }},
		{"a host segment twice", func() { RegisterSegment("test-host-segment", &SegmentSpec{Size: func(*conf.Config) int { return 8 }}) }},
		{"a host segment without size", func() { RegisterSegment("test-sizeless", &SegmentSpec{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.register()
		})
	}
	if _, ok := Lookup("test-host-segment"); ok {
		t.Error("a host segment reads as a plugin")
	}
	for _, n := range Names() {
		if n == "test-host-segment" || n == HealthSegment {
			t.Errorf("Names lists the host segment %s", n)
		}
	}
	if Segments()["test-host-segment"] == nil || Segments()[HealthSegment] == nil {
		t.Error("Segments leaves out a host segment")
	}
}

// testOwner is a test plugin owning a segment.
type testOwner struct {
	testPlugin
	spec *SegmentSpec
}

func (o *testOwner) Segment() *SegmentSpec { return o.spec }

func TestSegmentsListPluginsAndHost(t *testing.T) {
	spec := &SegmentSpec{Size: func(*conf.Config) int { return 64 }}
	Register(&testOwner{testPlugin{name: "test-owner"}, spec})
	got := Segments()
	if got["test-owner"] != spec {
		t.Errorf("the plugin's segment is %v, want its spec", got["test-owner"])
	}
	if got[HealthSegment] == nil || got[HealthSegment].Layout.Name != HealthSegment {
		t.Errorf("the health segment is %+v", got[HealthSegment])
	}
}

// testIndexer is a SnapshotBuilder that counts its builds.
type testIndexer struct {
	testPlugin
	builds int
}

func (x *testIndexer) BuildSnapshot(snap *conf.Snapshot, _ *Shared) (any, error) {
	x.builds++
	if snap != nil && snap.Version == 13 {
		return nil, errors.New("unlucky snapshot")
	}
	return &x.builds, nil
}

// stateHolder is testIndexer's instance: it keeps the state its Build saw.
type stateHolder struct{ state any }

func (*stateHolder) Log(*Ctx) {}

// Every route of one SnapshotBuild sees the one state BuildSnapshot made; another
// SnapshotBuild, or an Env made by hand, builds its own.
func TestSnapshotStateOncePerBuild(t *testing.T) {
	x := &testIndexer{testPlugin: testPlugin{name: "test-indexer"}}
	x.build = func(raw json.RawMessage, env *Env) (any, error) { return &stateHolder{env.SnapshotState}, nil }
	Register(x)
	set := raws(map[string]string{"test-indexer": `{}`})
	stateOf := func(env *Env) any {
		t.Helper()
		inst, err := BuildInstance("test-indexer", set["test-indexer"], env)
		if err != nil {
			t.Fatal(err)
		}
		return inst.(*stateHolder).state
	}
	b := NewSnapshotBuild(&conf.Snapshot{Version: 1}, &Shared{})
	first := stateOf(b.Env(&RouteInfo{ID: "1"}, ""))
	second := stateOf(b.Env(&RouteInfo{ID: "2"}, "g1"))
	if x.builds != 1 || first != second || first == nil {
		t.Fatalf("%d builds, states %v and %v: want one state for both routes", x.builds, first, second)
	}
	if _, err := BuildChain(set, b.Env(&RouteInfo{ID: "3"}, "")); err != nil || x.builds != 1 {
		t.Fatalf("BuildChain: %v, %d builds", err, x.builds)
	}
	stateOf(NewSnapshotBuild(&conf.Snapshot{Version: 2}, &Shared{}).Env(&RouteInfo{}, ""))
	stateOf(&Env{})
	if x.builds != 3 {
		t.Fatalf("%d builds, want one more per SnapshotBuild and per Env made by hand", x.builds)
	}
	failing := NewSnapshotBuild(&conf.Snapshot{Version: 13}, &Shared{})
	for range 2 {
		if _, err := BuildChain(set, failing.Env(&RouteInfo{}, "")); err == nil || !strings.Contains(err.Error(), "test-indexer: unlucky snapshot") {
			t.Fatalf("BuildChain = %v, want the snapshot state's error", err)
		}
	}
	if x.builds != 4 {
		t.Fatalf("%d builds: a failed state is built again", x.builds)
	}
}

func TestCtxReuseAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	var req fasthttp.RequestCtx
	req.Request.SetRequestURI("/a?x=1&apikey=k")
	route := &RouteInfo{ID: "1"}
	name, value, arg := []byte("X-RateLimit-Remaining"), []byte("99"), []byte("apikey")
	allocs := testing.AllocsPerRun(1000, func() {
		c := AcquireCtx(&req, route, 0)
		c.AddResponseHeader(name, value)
		if string(c.QueryArg(arg)) != "k" {
			t.Fatal("QueryArg lost the argument")
		}
		c.Respond(429, nil, answerBody)
		c.ApplyResponseHeaders()
		ReleaseCtx(c)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
}

// The request view reads and changes the request that goes upstream; QueryArg reads a
// private parse, so the query sent stays the client's bytes until an argument is deleted.
func TestCtxRequestView(t *testing.T) {
	var req fasthttp.RequestCtx
	req.Request.SetRequestURI("/a%2Fb/../c?q=a%2Fb+c&apikey=k")
	req.Request.Header.SetHost("Gw.Test:8080")
	req.Request.Header.Set("X-Key", "v")
	c := AcquireCtx(&req, &RouteInfo{}, 0)
	defer ReleaseCtx(c)
	for _, tc := range []struct{ what, got, want string }{
		{"Method", string(c.Method()), "GET"},
		{"Host", string(c.Host()), "Gw.Test:8080"},
		{"Path", string(c.Path()), "/a/c"},
		{"RequestURI", string(c.RequestURI()), "/a%2Fb/../c?q=a%2Fb+c&apikey=k"},
		{"QueryString", string(c.QueryString()), "q=a%2Fb+c&apikey=k"},
		{"QueryArg", string(c.QueryArg([]byte("q"))), "a/b c"},
		{"RequestHeader", string(c.RequestHeader([]byte("x-key"))), "v"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	if got := string(req.Request.URI().QueryString()); got != "q=a%2Fb+c&apikey=k" {
		t.Errorf("QueryArg changed the query sent upstream to %q", got)
	}
	c.DelQueryArg([]byte("apikey"))
	if got := string(c.AppendQueryArgs(nil)); got != "q=a%2Fb+c" {
		t.Errorf("after DelQueryArg, the arguments are %q", got)
	}
	c.SetMethod([]byte("POST"))
	c.SetPath([]byte("/new%20path"))
	c.SetQueryString([]byte("z=1"))
	c.SetRequestHeader([]byte("X-Key"), []byte("w"))
	c.AddRequestHeader([]byte("X-Key"), []byte("x"))
	c.DelRequestHeader([]byte("X-Gone"))
	req.Request.URI().DisablePathNormalizing = true
	if got := string(req.Request.Header.Method()) + " " + string(req.Request.URI().RequestURI()); got != "POST /new%20path?z=1" {
		t.Errorf("sent upstream: %q", got)
	}
	if got := req.Request.Header.PeekAll("X-Key"); len(got) != 2 || string(got[0]) != "w" || string(got[1]) != "x" {
		t.Errorf("X-Key sent upstream: %q", got)
	}
}

// namer is a test auth plugin's instance: it names the consumer its configuration holds.
type namer struct {
	consumer string
	trace    *[]string
}

func (n *namer) Access(c *Ctx) error {
	*n.trace = append(*n.trace, "access:namer")
	c.Consumer = n.consumer
	return nil
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
	Register(&testAuth{testPlugin: testPlugin{name: "test-c-auth", priority: 2500,
		build: func(raw json.RawMessage, env *Env) (any, error) {
			var name string
			err := json.Unmarshal(raw, &name)
			return &namer{consumer: name, trace: &trace}, err
		}}})
	if !IsAuth("test-c-auth") || IsAuth("test-c-high") || IsAuth("no-such-plugin") {
		t.Fatal("IsAuth tells the auth plugin wrong")
	}
	build := func(set map[string]string) *Chain {
		ch, err := BuildChain(raws(set), &Env{})
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
		if err := ch.Access(c); err != nil {
			t.Fatal(err)
		}
		answered := c.Answered()
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

// responder is an instance that runs in the response phase only (plugins-c).
type responder struct {
	name  string
	trace *[]string
}

func (r *responder) Response(c *Ctx) {
	*r.trace = append(*r.trace, "response:"+r.name)
	// The queued headers are set before the response phase: it sees and may undo them.
	if c.ResponseHeader([]byte("X-test-access")) != nil {
		c.DelResponseHeader([]byte("X-test-access"))
		c.SetResponseHeader([]byte("X-Seen"), []byte(r.name))
	}
}

// A response-phase instance is a phase of its own: a chain of it alone is not empty, the
// global rules' run before the route's, each in priority order, after the queued headers.
func TestResponsePhase(t *testing.T) {
	var trace []string
	registerRecorder(t, "test-access", 5000, &trace)
	for name, priority := range map[string]int{"test-resp-high": 900, "test-resp-low": 100} {
		Register(&testPlugin{name: name, priority: priority, build: func(json.RawMessage, *Env) (any, error) {
			return &responder{name: name, trace: &trace}, nil
		}})
	}
	global, err := BuildChain(raws(map[string]string{"test-resp-low": `{}`}), &Env{})
	if err != nil || global.Empty() {
		t.Fatalf("a chain of a response phase alone: %v, empty %v", err, global.Empty())
	}
	route, err := BuildChain(raws(map[string]string{"test-resp-low": `{}`, "test-access": `{}`, "test-resp-high": `{}`}), &Env{})
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.RequestCtx
	c := AcquireCtx(&req, &RouteInfo{ID: "1"}, 0)
	defer ReleaseCtx(c)
	if err := route.Access(c); err != nil {
		t.Fatal(err)
	}
	c.ApplyResponseHeaders()
	RunResponsePhase([]*Chain{global}, route, c)
	got, want := strings.Join(trace, " "), "access:test-access response:test-resp-low response:test-resp-high response:test-resp-low"
	if got != want {
		t.Fatalf("trace %q, want %q", got, want)
	}
	if req.Response.Header.Peek("X-test-access") != nil || string(req.Response.Header.Peek("X-Seen")) != "test-resp-low" {
		t.Fatalf("the global rule's response phase did not see the queued header: %s", req.Response.Header.String())
	}
}

// keeper is a test instance that says, for its configuration, whether it keeps the request.
type keeper struct{ keeps bool }

func (keeper) Access(*Ctx) error    { return nil }
func (k keeper) KeepsRequest() bool { return k.keeps }

// keeperPlugin is a test plugin that keeps the request whatever its instance says.
type keeperPlugin struct{ testPlugin }

func (*keeperPlugin) KeepsRequest() bool { return true }

// A chain keeps the request when each instance does: an instance's own word (key-auth's,
// per hide_credentials) first, else its plugin's, and a plugin that says nothing does not.
func TestChainKeepsRequest(t *testing.T) {
	Register(&keeperPlugin{testPlugin{name: "test-keeper", build: func(raw json.RawMessage, env *Env) (any, error) {
		return keeper{keeps: string(raw) != `"changes"`}, nil
	}}})
	Register(&keeperPlugin{testPlugin{name: "test-keeper-plugin", build: func(raw json.RawMessage, env *Env) (any, error) {
		return &recorder{name: "k", trace: new([]string)}, nil
	}}})
	Register(&testPlugin{name: "test-silent", build: func(raw json.RawMessage, env *Env) (any, error) {
		return &recorder{name: "s", trace: new([]string)}, nil
	}})
	for _, tc := range []struct {
		set  map[string]string
		want bool
	}{
		{map[string]string{"test-keeper": `{}`}, true},
		{map[string]string{"test-keeper": `"changes"`}, false},
		{map[string]string{"test-keeper-plugin": `{}`}, true},
		{map[string]string{"test-keeper": `{}`, "test-keeper-plugin": `{}`}, true},
		{map[string]string{"test-keeper": `{}`, "test-silent": `{}`}, false},
	} {
		ch, err := BuildChain(raws(tc.set), &Env{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ch.KeepsRequest(); got != tc.want {
			t.Errorf("%v: KeepsRequest %v, want %v", tc.set, got, tc.want)
		}
	}
}
