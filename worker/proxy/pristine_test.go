package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func TestDroppedHeader(t *testing.T) {
	for _, name := range []string{"te", "TE", "Host", "hOST", "Trailer", "upgrade", "X-Real-IP", "x-real-ip",
		"Connection", "KEEP-ALIVE", "X-Forwarded-For", "x-forwarded-host", "X-Forwarded-Port", "proxy-connection",
		"X-Forwarded-Proto", "Transfer-Encoding", "Proxy-Authenticate", "proxy-authorization"} {
		if !droppedHeader([]byte(name)) {
			t.Errorf("%q is kept, want dropped", name)
		}
	}
	for _, name := range []string{"", "T", "Tf", "Hostx", "Accept", "X-Forwarded-Fox", "X_Forwarded_For",
		"X-Real-IQ", "Content-Length", "Cookie", "User-Agent", "Upgrade-Insecure-Requests", "Keep-Alivf"} {
		if droppedHeader([]byte(name)) {
			t.Errorf("%q is dropped, want kept", name)
		}
	}
}

func TestHeaderLines(t *testing.T) {
	raw := "Host: a\r\nX-A:  1 \r\nX-B:\r\nX-Tab:\t2 3\t \r\nX-Blank: \t \r\n\r\nX-After: no\r\n"
	var got []string
	for name, value := range headerLines([]byte(raw)) {
		got = append(got, string(name)+"="+string(value))
	}
	want := []string{"Host=a", "X-A=1", "X-B=", "X-Tab=2 3", "X-Blank="}
	if len(got) != len(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lines %q, want %q", got, want)
		}
	}
}

func TestListedIn(t *testing.T) {
	list := []byte("keep-alive, X-Client-Hop ,host,Content-Length,")
	for name, want := range map[string]bool{"X-Client-Hop": true, "x-client-hop": true, "Keep-Alive": true,
		"Host": false, "content-length": false, "X-Other": false} {
		if got := listedIn(list, []byte(name)); got != want {
			t.Errorf("listedIn(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestPristineHeaderEdits: the header fields a plugin set and removed through its Ctx
// (opentelemetry's traceparent and tracestate) reach the node in place of the client's,
// by the pristine path as by the usual one, and the client's other fields stay.
func TestPristineHeaderEdits(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		for _, name := range []string{"traceparent", "tracestate", "X-Keep", "X-Added", "User-Agent"} {
			var values []string
			for _, v := range ctx.Request.Header.PeekAll(name) {
				values = append(values, string(v))
			}
			fmt.Fprintf(ctx, "%s=%s\n", name, strings.Join(values, ","))
		}
	})
	const want = "traceparent=00-new\ntracestate=\nX-Keep=1,2\nX-Added=a,b\nUser-Agent=ua\n"
	for _, pristine := range []bool{false, true} {
		t.Run(fmt.Sprintf("pristine=%v", pristine), func(t *testing.T) {
			up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
			proxy := startProxyWith(t, func(ctx *fasthttp.RequestCtx) {
				var c plugins.Ctx
				c.Begin(ctx, nil, 0)
				c.DelRequestHeader([]byte("tracestate"))
				c.SetRequestHeader([]byte("traceparent"), []byte("00-old-too"))
				c.SetRequestHeader([]byte("traceparent"), []byte("00-new"))
				c.AddRequestHeader([]byte("X-Added"), []byte("a"))
				c.AddRequestHeader([]byte("X-Added"), []byte("b"))
				up.ForwardInfo(ctx, &Info{Pristine: pristine, Edits: c.HeaderEdits()})
				c.End()
			})
			req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/", nil)
			req.Header["traceparent"] = []string{"00-client", "00-client-again"}
			req.Header["tracestate"] = []string{"vendor=1"}
			req.Header["X-Keep"] = []string{"1", "2"}
			req.Header.Set("User-Agent", "ua")
			if status, body := do(t, req); status != 200 || body != want {
				t.Errorf("node saw (status %d)\n%s\nwant\n%s", status, body, want)
			}
		})
	}
}

// TestPristineForwardWithEditsDoesNotAllocate: opentelemetry's edits, recorded and sent by
// the pristine path, cost no allocation.
func TestPristineForwardWithEditsDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled objects are allocated again")
	}
	var seen atomic.Int64
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Request.Header.Peek("traceparent")) == "00-new" && ctx.Request.Header.Peek("tracestate") == nil {
			seen.Add(1)
		}
		ctx.WriteString("hello") //nolint:errcheck
	})
	p := NewPools()
	t.Cleanup(p.Close)
	up, err := p.Upstream(&conf.Upstream{Nodes: conf.Nodes{s.node(1)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var template fasthttp.Request
	raw := "GET /small HTTP/1.1\r\nHost: client.example\r\ntraceparent: 00-client\r\ntracestate: v=1\r\n" +
		"User-Agent: bench\r\n\r\n"
	if err := template.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&template, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}, nil)
	var c plugins.Ctx
	name, state, value := []byte("traceparent"), []byte("tracestate"), []byte("00-new")
	var runs int64
	run := func() {
		template.CopyTo(&ctx.Request)
		ctx.Request.URI()
		c.Begin(&ctx, nil, 0)
		c.DelRequestHeader(state)
		c.SetRequestHeader(name, value)
		up.ForwardInfo(&ctx, &Info{Pristine: true, Edits: c.HeaderEdits()})
		c.End()
		runs++
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			t.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		ctx.Response.Reset()
	}
	for range 20 {
		run()
	}
	if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
		t.Errorf("a pristine forward with edits allocates %.1f times per request, want 0", allocs)
	}
	if seen.Load() != runs {
		t.Errorf("the node saw the edits in %d of %d requests", seen.Load(), runs)
	}
}

// The fields a plugin set (request-id's, through Ctx.SetRequestHeader) reach the node on
// the pristine path as prepareRequest sends them: once, in place of a client's empty one,
// not when the client's Connection names them, and one the proxy sets itself
// (X-Forwarded-For) goes the usual way. Each case's node sees the same fields whichever path the request took.
func TestPristineAdded(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		var lines []string
		for name, value := range headerLines(ctx.Request.Header.RawHeaders()) {
			switch name := strings.ToLower(string(name)); name {
			case "host", "x-forwarded-host", "x-forwarded-port": // each proxy's own port
			default:
				lines = append(lines, name+": "+string(value))
			}
		}
		slices.Sort(lines)
		ctx.WriteString(strings.Join(lines, "\n")) //nolint:errcheck
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	cases := []struct {
		name    string
		client  []string // the client's header fields
		added   []string // the plugin's
		want    string   // a line the node must see, or none
		wantNot string   // a line the node must not see
	}{
		{name: "added", added: []string{"X-Request-Id", "id-1"}, want: "x-request-id: id-1"},
		{name: "client's empty one replaced", client: []string{"X-Request-Id", ""}, added: []string{"X-Request-Id", "id-2"},
			want: "x-request-id: id-2", wantNot: "x-request-id: "},
		{name: "two added", added: []string{"X-A", "1", "X-B", "2"}, want: "x-b: 2"},
		{name: "named by Connection", client: []string{"Connection", "X-Request-Id"}, added: []string{"X-Request-Id", "id-3"},
			wantNot: "x-request-id: id-3"},
		{name: "one the proxy sets", added: []string{"X-Forwarded-For", "id-4"}, want: "x-forwarded-for: id-4, 127.0.0.1"},
	}
	for _, tc := range cases {
		seen := map[bool]string{}
		for _, pristine := range []bool{false, true} {
			proxy := startProxyWith(t, func(ctx *fasthttp.RequestCtx) {
				var c plugins.Ctx
				c.Begin(ctx, nil, 0)
				for i := 0; i+1 < len(tc.added); i += 2 {
					c.SetRequestHeader([]byte(tc.added[i]), []byte(tc.added[i+1]))
				}
				up.ForwardInfo(ctx, &Info{Pristine: pristine, Edits: c.HeaderEdits()})
				c.End()
			})
			req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/", nil)
			for i := 0; i+1 < len(tc.client); i += 2 {
				req.Header[tc.client[i]] = []string{tc.client[i+1]}
			}
			status, body := do(t, req)
			if status != 200 {
				t.Fatalf("%s, pristine %v: %d %s", tc.name, pristine, status, body)
			}
			lines := strings.Split(body, "\n")
			if tc.want != "" && !slices.Contains(lines, tc.want) {
				t.Errorf("%s, pristine %v: the node saw\n%s\nwant the line %q", tc.name, pristine, body, tc.want)
			}
			if tc.wantNot != "" && slices.Contains(lines, tc.wantNot) {
				t.Errorf("%s, pristine %v: the node saw\n%s\nwant no line %q", tc.name, pristine, body, tc.wantNot)
			}
			seen[pristine] = body
		}
		if seen[true] != seen[false] {
			t.Errorf("%s: the node saw\n%s\non the pristine path, and\n%s\nthe usual way", tc.name, seen[true], seen[false])
		}
	}
}

// Touches(setByTheProxy): only a field the proxy drops or sets itself, or Content-Length,
// sends a request the usual way.
func TestEditsTouchingDroppedHeaders(t *testing.T) {
	for _, tc := range []struct {
		added []string
		want  bool
	}{
		{nil, false},
		{[]string{"X-Request-Id", "1"}, false},
		{[]string{"X-Request-Id", "1", "x-real-ip", "2"}, true},
		{[]string{"Host", "a"}, true},
		{[]string{"content-length", "a"}, true},
	} {
		var c plugins.Ctx
		c.Begin(new(fasthttp.RequestCtx), nil, 0)
		for i := 0; i+1 < len(tc.added); i += 2 {
			c.SetRequestHeader([]byte(tc.added[i]), []byte(tc.added[i+1]))
		}
		if got := c.HeaderEdits().Touches(setByTheProxy); got != tc.want {
			t.Errorf("edits %q touch a dropped header: %v, want %v", tc.added, got, tc.want)
		}
		c.End()
	}
}
