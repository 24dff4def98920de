package requestid

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
)

func instance(t testing.TB, cfg string) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

// serve runs cfg's Access on a request with the given headers, then sets upstream's
// response headers as a proxied response would, and returns the id sent upstream and
// the one in the response.
func serve(t *testing.T, cfg string, reqHeaders, upstream []string) (sent, answered string) {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/opentracing")
	for i := 0; i+1 < len(reqHeaders); i += 2 {
		ctx.Request.Header.Set(reqHeaders[i], reqHeaders[i+1])
	}
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	p := instance(t, cfg)
	if err := p.Access(c); err != nil || c.Answered() {
		t.Fatalf("Access: %v, answered %v", err, c.Answered())
	}
	name := "X-Request-Id"
	if strings.Contains(cfg, "header_name") {
		name = "Custom-Header-Name"
	}
	// A new id is also in the edits the proxy's pristine path sends; a client's is not.
	added := string(c.HeaderEdits().Lines())
	clientID := len(ctx.Request.Header.Peek(name)) > 0 && added == ""
	if want := name + ": " + string(ctx.Request.Header.Peek(name)) + "\r\n"; !clientID && added != want {
		t.Errorf("HeaderEdits %q, want the id sent upstream, %q", added, want)
	}
	for i := 0; i+1 < len(upstream); i += 2 {
		ctx.Response.Header.Set(upstream[i], upstream[i+1])
	}
	c.ApplyResponseHeaders()
	return string(ctx.Request.Header.Peek(name)), string(ctx.Response.Header.Peek(name))
}

var (
	uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	nanoid = regexp.MustCompile(`^[-_0-9a-zA-Z]{21}$`)
)

func TestAccess(t *testing.T) {
	for _, tc := range []struct {
		name, cfg            string
		reqHeaders, upstream []string
		want                 *regexp.Regexp
		wantInResponse       bool
		wantSame             string // the id expected, when not a new one
	}{
		// t/plugin/request-id.t TEST 4 "check for request id in response header (default
		// header name)", TEST 23 "algorithm uuid (default) generates uuid v4".
		{name: "default", cfg: `{}`, want: uuidV4, wantInResponse: true},
		// TEST 7 "custom header name".
		{name: "custom header", cfg: `{"header_name":"Custom-Header-Name"}`, want: uuidV4, wantInResponse: true},
		// TEST 9 "request id is not present in the response header".
		{name: "not in response", cfg: `{"include_in_response":false}`, want: uuidV4},
		// TEST 14 "echo back the client's header if given".
		{name: "client's id", cfg: `{}`, reqHeaders: []string{"X-Request-Id", "123"}, wantSame: "123", wantInResponse: true},
		// TEST 16 "request id is empty in request": a new one.
		{name: "client's empty id", cfg: `{}`, reqHeaders: []string{"X-Request-Id", ""}, want: uuidV4, wantInResponse: true},
		// The upstream's own id in the response is kept.
		{name: "upstream's id", cfg: `{}`, upstream: []string{"X-Request-Id", "from-upstream"}, want: uuidV4},
		// TEST 15, 20, 28: nanoid and uuidv7 formats.
		{name: "nanoid", cfg: `{"algorithm":"nanoid"}`, want: nanoid, wantInResponse: true},
		{name: "uuidv7", cfg: `{"algorithm":"uuidv7"}`, want: uuidV7, wantInResponse: true},
		{name: "range_id", cfg: `{"algorithm":"range_id","range_id":{"length":10,"char_set":"abcdef"}}`, want: regexp.MustCompile(`^[a-f]{10}$`), wantInResponse: true},
		{name: "range_id defaults", cfg: `{"algorithm":"range_id"}`, want: regexp.MustCompile(`^[a-zA-Z0-9]{16}$`), wantInResponse: true},
		// Longer than the stack's buffer: made in a pooled one.
		{name: "range_id long", cfg: `{"algorithm":"range_id","range_id":{"length":100}}`, want: regexp.MustCompile(`^[a-zA-Z0-9]{100}$`), wantInResponse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, answered := serve(t, tc.cfg, tc.reqHeaders, tc.upstream)
			if tc.wantSame != "" && sent != tc.wantSame || tc.want != nil && !tc.want.MatchString(sent) {
				t.Errorf("sent upstream %q", sent)
			}
			switch {
			case tc.wantInResponse && answered != sent:
				t.Errorf("response has %q, want %q", answered, sent)
			case !tc.wantInResponse && tc.upstream != nil && answered != tc.upstream[1]:
				t.Errorf("response has %q, want the upstream's %q", answered, tc.upstream[1])
			case !tc.wantInResponse && tc.upstream == nil && answered != "":
				t.Errorf("response has %q, want none", answered)
			}
		})
	}
}

// TEST 5 "check for unique id", TEST 21 "uuid v7 uniqueness", TEST 22 "uuid v7 time
// ordering": 10,000 ids of each algorithm are distinct, and version 7 ids increase.
func TestIDsAreUniqueAndOrdered(t *testing.T) {
	for _, c := range []*Config{{Algorithm: UUID}, {Algorithm: UUIDv7}, {Algorithm: NanoID}, {Algorithm: RangeID, Length: 16, CharSet: []byte(DefaultCharSet)}} {
		seen := map[string]bool{}
		last := ""
		for range 10000 {
			id := string(c.appendID(nil))
			if seen[id] {
				t.Fatalf("algorithm %d: %s twice", c.Algorithm, id)
			}
			seen[id] = true
			if c.Algorithm == UUIDv7 && id <= last {
				t.Fatalf("uuidv7 %s after %s", id, last)
			}
			last = id
		}
	}
}

// A version 7 UUID carries the time in milliseconds (TEST 24).
func TestUUIDv7Time(t *testing.T) {
	id := string(appendUUIDv7(nil))
	var ms uint64
	for _, ch := range strings.ReplaceAll(id[:13], "-", "") {
		ms = ms<<4 | uint64(strings.IndexRune(hexDigits, ch))
	}
	if ms < 1700000000000 || ms > 4000000000000 {
		t.Errorf("%s: timestamp %d ms", id, ms)
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, cfg := range []string{`{}`, `{"algorithm":"uuidv7"}`, `{"algorithm":"nanoid"}`, `{"algorithm":"range_id"}`, `{"algorithm":"range_id","range_id":{"length":1024}}`} {
		p := instance(t, cfg)
		ctx := &fasthttp.RequestCtx{}
		route := &plugins.RouteInfo{}
		c := plugins.AcquireCtx(ctx, route, 0)
		p.Access(c) // the header and queue buffers grow once
		allocs := testing.AllocsPerRun(200, func() {
			c.End()
			ctx.Request.Header.Del("X-Request-Id")
			c.Begin(ctx, route, 0)
			if p.Access(c) != nil {
				t.Fatal("error")
			}
			c.ApplyResponseHeaders()
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", cfg, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	for _, cfg := range []string{`{}`, `{"algorithm":"uuidv7"}`, `{"algorithm":"nanoid"}`, `{"algorithm":"range_id"}`, `{"algorithm":"range_id","range_id":{"length":1024}}`} {
		b.Run(cfg, func(b *testing.B) {
			p := instance(b, cfg)
			ctx := &fasthttp.RequestCtx{}
			route := &plugins.RouteInfo{}
			c := plugins.AcquireCtx(ctx, route, 0)
			b.ReportAllocs()
			for b.Loop() {
				c.End()
				ctx.Request.Header.Del("X-Request-Id")
				c.Begin(ctx, route, 0)
				p.Access(c)
			}
		})
	}
}

func BenchmarkIDs(b *testing.B) {
	for _, c := range []*Config{{Algorithm: UUID}, {Algorithm: UUIDv7}, {Algorithm: NanoID}, {Algorithm: RangeID, Length: 16, CharSet: []byte(DefaultCharSet)}} {
		b.Run(string(rune('0'+c.Algorithm)), func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				buf = c.appendID(buf[:0])
			}
		})
	}
}
