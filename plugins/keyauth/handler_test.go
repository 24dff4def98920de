package keyauth

import (
	"encoding/json"
	"net"
	"reflect"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

// snapshot holds jack (key "jack-key"), jill (key "jill-key") and guest (no key).
func snapshot() *conf.Snapshot {
	return &conf.Snapshot{Consumers: []conf.Consumer{
		{Username: "jack", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"jack-key"}`)}},
		{Username: "jill", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"jill-key"}`)}},
		{Username: "guest"},
		// A second holder of jack's key, which the Admin API would have refused: jack keeps it.
		{Username: "late", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"jack-key"}`)}},
		// Keys the master could not resolve (their variables are unset): they match nothing.
		{Username: "vault", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"$env://GW_UNSET"}`)}},
		{Username: "vault2", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"$ENV://GW_UNSET/key"}`)}},
	}}
}

func instance(t testing.TB, cfg string, snap *conf.Snapshot) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

func request(uri string, headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("gw.test")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

func TestAccess(t *testing.T) {
	snap := snapshot()
	cases := []struct {
		name, cfg, uri string
		headers        []string
		// wantConsumer is the consumer let through; "" means a 401 with wantBody.
		wantConsumer, wantBody string
		// wantURI and wantHeader are what is proxied (checked only when let through).
		wantURI, wantHeader string
	}{
		{name: "header", cfg: `{}`, uri: "/a", headers: []string{"apikey", "jack-key"},
			wantConsumer: "jack", wantURI: "/a", wantHeader: "jack-key"},
		{name: "header name is case-insensitive", cfg: `{}`, uri: "/a", headers: []string{"ApiKey", "jill-key"},
			wantConsumer: "jill", wantURI: "/a", wantHeader: "jill-key"},
		{name: "query", cfg: `{}`, uri: "/a?apikey=jill-key&x=1",
			wantConsumer: "jill", wantURI: "/a?apikey=jill-key&x=1"},
		{name: "header wins over query", cfg: `{}`, uri: "/a?apikey=nope", headers: []string{"apikey", "jack-key"},
			wantConsumer: "jack", wantURI: "/a?apikey=nope", wantHeader: "jack-key"},
		{name: "custom header", cfg: `{"header":"X-Token"}`, uri: "/a", headers: []string{"X-Token", "jack-key"},
			wantConsumer: "jack", wantURI: "/a"},
		{name: "custom query", cfg: `{"query":"token"}`, uri: "/a?token=jack-key",
			wantConsumer: "jack", wantURI: "/a?token=jack-key"},
		{name: "hide header", cfg: `{"hide_credentials":true}`, uri: "/a", headers: []string{"apikey", "jack-key"},
			wantConsumer: "jack", wantURI: "/a", wantHeader: ""},
		{name: "hide query", cfg: `{"hide_credentials":true}`, uri: "/a?x=1&apikey=jack-key&y=2",
			wantConsumer: "jack", wantURI: "/a?x=1&y=2"},
		{name: "query untouched without hide", cfg: `{}`, uri: "/a?q=a%2Fb+c&apikey=jack-key",
			wantConsumer: "jack", wantURI: "/a?q=a%2Fb+c&apikey=jack-key"},
		{name: "missing", cfg: `{}`, uri: "/a", wantBody: `{"message":"Missing API key in request"}` + "\n"},
		{name: "empty header is missing", cfg: `{}`, uri: "/a", headers: []string{"apikey", ""},
			wantBody: `{"message":"Missing API key in request"}` + "\n"},
		{name: "other header ignored", cfg: `{"header":"X-Token"}`, uri: "/a", headers: []string{"apikey", "jack-key"},
			wantBody: `{"message":"Missing API key in request"}` + "\n"},
		{name: "unknown key", cfg: `{}`, uri: "/a", headers: []string{"apikey", "nobody"},
			wantBody: `{"message":"Invalid API key in request"}` + "\n"},
		{name: "unknown query key", cfg: `{}`, uri: "/a?apikey=nobody",
			wantBody: `{"message":"Invalid API key in request"}` + "\n"},
		{name: "an unresolved reference's text", cfg: `{}`, uri: "/a", headers: []string{"apikey", "$env://GW_UNSET"},
			wantBody: `{"message":"Invalid API key in request"}` + "\n"},
		{name: "an unresolved reference's text in the query", cfg: `{}`, uri: "/a?apikey=%24ENV%3A%2F%2FGW_UNSET%2Fkey",
			wantBody: `{"message":"Invalid API key in request"}` + "\n"},
		{name: "anonymous", cfg: `{"anonymous_consumer":"guest"}`, uri: "/a",
			wantConsumer: "guest", wantURI: "/a"},
		{name: "anonymous after a bad key, hidden", cfg: `{"anonymous_consumer":"guest","hide_credentials":true}`,
			uri: "/a?apikey=bad", headers: []string{"apikey", "bad"}, wantConsumer: "guest", wantURI: "/a", wantHeader: ""},
		{name: "anonymous that does not exist", cfg: `{"anonymous_consumer":"ghost"}`, uri: "/a",
			wantBody: `{"message":"Invalid user authorization"}` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := request(tc.uri, tc.headers...)
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg, snap).Access(c); err != nil {
				t.Fatal(err)
			}
			answered := c.Answered()
			c.ApplyResponseHeaders()
			if tc.wantConsumer == "" {
				if !answered || ctx.Response.StatusCode() != 401 || string(ctx.Response.Body()) != tc.wantBody {
					t.Fatalf("answered %v, %d %q; want 401 %q", answered, ctx.Response.StatusCode(), ctx.Response.Body(), tc.wantBody)
				}
				if got := string(ctx.Response.Header.Peek("WWW-Authenticate")); got != `apikey realm="key"` {
					t.Errorf("WWW-Authenticate = %q", got)
				}
				if c.Consumer != "" {
					t.Errorf("rejected request has consumer %q", c.Consumer)
				}
				return
			}
			if answered || c.Consumer != tc.wantConsumer {
				t.Fatalf("answered %v (%d %q), consumer %q; want %q let through",
					answered, ctx.Response.StatusCode(), ctx.Response.Body(), c.Consumer, tc.wantConsumer)
			}
			ctx.Request.URI().DisablePathNormalizing = true // as the proxy sends it
			if got := string(ctx.Request.URI().RequestURI()); got != tc.wantURI {
				t.Errorf("proxied URI = %q, want %q", got, tc.wantURI)
			}
			if tc.wantHeader != "" || len(tc.headers) > 0 && tc.headers[0] == "apikey" {
				if got := string(ctx.Request.Header.Peek("apikey")); got != tc.wantHeader {
					t.Errorf("proxied apikey header = %q, want %q", got, tc.wantHeader)
				}
			}
		})
	}
}

func TestRealmInChallenge(t *testing.T) {
	ctx := request("/a")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(c)
	if err := instance(t, `{"realm":"shop"}`, snapshot()).Access(c); err != nil {
		t.Fatal(err)
	}
	c.ApplyResponseHeaders()
	if got := string(ctx.Response.Header.Peek("WWW-Authenticate")); got != `apikey realm="shop"` {
		t.Errorf("WWW-Authenticate = %q", got)
	}
}

// Every route of one snapshot shares the index; a new snapshot gets its own.
func TestIndexPerSnapshot(t *testing.T) {
	byKey := func(env *plugins.Env) map[string]string {
		t.Helper()
		built, err := plugins.BuildInstance(Name, json.RawMessage(`{}`), env)
		if err != nil {
			t.Fatal(err)
		}
		return built.(*keyAuth).byKey
	}
	same := func(a, b map[string]string) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	first := plugins.NewSnapshotBuild(snapshot(), &plugins.Shared{})
	a, b := byKey(first.Env(&plugins.RouteInfo{ID: "1"}, "")), byKey(first.Env(&plugins.RouteInfo{ID: "2"}, ""))
	if !same(a, b) {
		t.Error("two routes of one snapshot built two indexes")
	}
	second := plugins.NewSnapshotBuild(&conf.Snapshot{Consumers: []conf.Consumer{
		{Username: "jack", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"new-key"}`)}},
	}}, &plugins.Shared{})
	c := byKey(second.Env(&plugins.RouteInfo{ID: "1"}, ""))
	if same(c, a) || c["new-key"] != "jack" || c["jack-key"] != "" {
		t.Errorf("second snapshot's index = %+v", c)
	}
	if len(byKey(&plugins.Env{})) != 0 {
		t.Error("no snapshot should give an empty index")
	}
	if _, err := (plugin{}).Build(json.RawMessage(`{}`), &plugins.Env{Snapshot: snapshot()}); err == nil {
		t.Error("Build without the snapshot's index succeeded")
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	k := instance(t, `{}`, snapshot())
	for _, uri := range []string{"/a", "/a?apikey=jill-key"} {
		ctx := request(uri, "X-Other", "1")
		if uri == "/a" {
			ctx.Request.Header.Set("apikey", "jack-key")
		}
		c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		allocs := testing.AllocsPerRun(200, func() {
			c.Consumer = ""
			if k.Access(c) != nil || c.Answered() || c.Consumer == "" {
				t.Fatal("rejected")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", uri, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccessHeader(b *testing.B) {
	k := instance(b, `{}`, snapshot())
	ctx := request("/a", "apikey", "jack-key")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		k.Access(c)
	}
}

func BenchmarkAccessQuery(b *testing.B) {
	k := instance(b, `{}`, snapshot())
	ctx := request("/a?x=1&apikey=jill-key")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		k.Access(c)
	}
}

// key-auth keeps the request (its routes may send the client's header block as it came)
// unless it hides the key.
func TestKeepsRequest(t *testing.T) {
	for cfg, want := range map[string]bool{`{}`: true, `{"hide_credentials":false}`: true, `{"hide_credentials":true}`: false} {
		if got := instance(t, cfg, nil).(plugins.RequestKeeper).KeepsRequest(); got != want {
			t.Errorf("%s: KeepsRequest %v, want %v", cfg, got, want)
		}
	}
}
