package basicauth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func snapshot() *conf.Snapshot {
	return &conf.Snapshot{Consumers: []conf.Consumer{
		{Username: "jack", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"foo","password":"bar"}`)}},
		{Username: "jill", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"jill1","password":"p:w"}`)}},
		{Username: "guest"},
		// A password the master could not resolve (its variable is unset): it matches nothing.
		{Username: "vault", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"vault","password":"$env://GW_UNSET"}`)}},
	}}
}

func instance(t testing.TB, cfg string) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{Snapshot: snapshot()})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

func basic(userPass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))
}

func TestAccess(t *testing.T) {
	const (
		missing   = `{"message":"Missing authorization in request"}` + "\n"
		malformed = `{"message":"Invalid authorization in request"}` + "\n"
		invalid   = `{"message":"Invalid user authorization"}` + "\n"
	)
	cases := []struct {
		name, cfg, authorization string
		wantConsumer, wantBody   string
	}{
		{"valid", `{}`, basic("foo:bar"), "jack", ""},
		{"scheme in any case", `{}`, "bAsIc " + base64.StdEncoding.EncodeToString([]byte("foo:bar")), "jack", ""},
		{"no padding", `{}`, "Basic " + base64.RawStdEncoding.EncodeToString([]byte("foo:bar")), "jack", ""},
		{"white space removed", `{}`, basic(" foo : bar "), "jack", ""},
		{"password with colons", `{}`, basic("jill1:p:w"), "jill", ""},
		{"junk before the scheme", `{}`, "x Basic " + base64.StdEncoding.EncodeToString([]byte("foo:bar")), "jack", ""},
		{"no header", `{}`, "", "", missing},
		{"other scheme", `{}`, "Bearer abc", "", malformed},
		{"scheme alone", `{}`, "Basic ", "", malformed},
		{"not base64", `{}`, "Basic !!!", "", malformed},
		{"no colon", `{}`, basic("foobar"), "", malformed},
		{"too long", `{}`, basic("foo:" + strings.Repeat("x", 600)), "", malformed},
		{"wrong password", `{}`, basic("foo:baz"), "", invalid},
		{"password prefix", `{}`, basic("foo:ba"), "", invalid},
		{"unknown user", `{}`, basic("nobody:bar"), "", invalid},
		{"an unresolved password's text", `{}`, basic("vault:$env://GW_UNSET"), "", invalid},
		{"consumer name is not the username", `{}`, basic("jack:bar"), "", invalid},
		{"anonymous", `{"anonymous_consumer":"guest"}`, "", "guest", ""},
		{"anonymous after a wrong password", `{"anonymous_consumer":"guest"}`, basic("foo:nope"), "guest", ""},
		{"anonymous missing", `{"anonymous_consumer":"ghost"}`, "", "", invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.SetRequestURI("/a")
			if tc.authorization != "" {
				ctx.Request.Header.Set("Authorization", tc.authorization)
			}
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg).Access(c); err != nil {
				t.Fatal(err)
			}
			answered := c.Answered()
			c.ApplyResponseHeaders()
			if tc.wantConsumer == "" {
				if !answered || ctx.Response.StatusCode() != 401 || string(ctx.Response.Body()) != tc.wantBody {
					t.Fatalf("answered %v, %d %q; want 401 %q", answered, ctx.Response.StatusCode(), ctx.Response.Body(), tc.wantBody)
				}
				if got := string(ctx.Response.Header.Peek("WWW-Authenticate")); got != `Basic realm="basic"` {
					t.Errorf("WWW-Authenticate = %q", got)
				}
				return
			}
			if answered || c.Consumer != tc.wantConsumer {
				t.Fatalf("answered %v (%q), consumer %q; want %q", answered, ctx.Response.Body(), c.Consumer, tc.wantConsumer)
			}
			if tc.authorization != "" && string(ctx.Request.Header.Peek("Authorization")) != tc.authorization {
				t.Error("Authorization changed without hide_credentials")
			}
		})
	}
}

func TestHideCredentials(t *testing.T) {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.Set("Authorization", basic("foo:bar"))
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(c)
	if instance(t, `{"hide_credentials":true}`).Access(c) != nil || c.Answered() || c.Consumer != "jack" {
		t.Fatal("rejected")
	}
	if got := ctx.Request.Header.Peek("Authorization"); got != nil {
		t.Errorf("Authorization still sent: %q", got)
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	b := instance(t, `{}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.Set("Authorization", basic("foo:bar"))
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	allocs := testing.AllocsPerRun(200, func() {
		if b.Access(c) != nil || c.Answered() {
			t.Fatal("rejected")
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per request, want 0", allocs)
	}
}

func BenchmarkAccess(b *testing.B) {
	p := instance(b, `{}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.Set("Authorization", basic("foo:bar"))
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		p.Access(c)
	}
}
