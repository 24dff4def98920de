package proxymirror

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
)

// seen is one copy as the mirror received it.
type seen struct {
	method, target, host, header, body string
}

// mirrorServer records each copy it receives.
func mirrorServer(t *testing.T) (host string, copies <-chan seen) {
	ch := make(chan seen, 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{r.Method, r.RequestURI, r.Host, r.Header.Get("X-A"), string(b)}
		io.WriteString(w, "the mirror's answer, dropped")
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func instance(t testing.TB, cfg string) *mirror {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return built.(*mirror)
}

func request(method, uri, body string, headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("gw.test")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	if body != "" {
		ctx.Request.SetBodyString(body)
		ctx.Request.Header.SetContentLength(len(body))
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

// serve runs both phases for one request, as the worker would around a proxied one.
func serve(t testing.TB, m *mirror, ctx *fasthttp.RequestCtx, start int64, answer bool) {
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, start)
	defer plugins.ReleaseCtx(c)
	if err := m.Access(c); err != nil {
		t.Fatal(err)
	}
	if answer {
		c.Respond(401, nil, nil)
	}
	m.Log(c)
}

func next(t *testing.T, copies <-chan seen) seen {
	t.Helper()
	select {
	case s := <-copies:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no copy reached the mirror")
	}
	return seen{}
}

// t/plugin/proxy-mirror.t TEST 7, 9, 19, 20, 28, 29: what the mirror gets.
func TestMirror(t *testing.T) {
	host, copies := mirrorServer(t)
	cases := []struct {
		name, cfg, method, uri, body string
		want                         seen
	}{
		{"TEST 7, 9: the request as it is", `{"host":"` + host + `"}`, "GET", "/hello?x=1", "",
			seen{"GET", "/hello?x=1", "gw.test", "a-value", ""}},
		{"TEST 19: path replaces", `{"host":"` + host + `","path":"/a"}`, "GET", "/hello", "",
			seen{"GET", "/a", "gw.test", "a-value", ""}},
		{"TEST 20: path replaces, the query stays", `{"host":"` + host + `","path":"/a"}`, "GET", "/hello?a=1", "",
			seen{"GET", "/a?a=1", "gw.test", "a-value", ""}},
		{"TEST 28: prefix", `{"host":"` + host + `","path":"/a","path_concat_mode":"prefix"}`, "GET", "/hello", "",
			seen{"GET", "/a/hello", "gw.test", "a-value", ""}},
		{"TEST 29: prefix with the query", `{"host":"` + host + `","path":"/a","path_concat_mode":"prefix"}`, "GET", "/hello?a=1", "",
			seen{"GET", "/a/hello?a=1", "gw.test", "a-value", ""}},
		{"a body", `{"host":"` + host + `"}`, "POST", "/up", `{"k":"v"}`,
			seen{"POST", "/up", "gw.test", "a-value", `{"k":"v"}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := request(tc.method, tc.uri, tc.body, "X-A", "a-value")
			serve(t, instance(t, tc.cfg), ctx, 1, false)
			if got := next(t, copies); got != tc.want {
				t.Fatalf("the mirror got %+v, want %+v", got, tc.want)
			}
			if string(ctx.Request.Body()) != tc.body {
				t.Fatalf("the upstream's body is %q", ctx.Request.Body())
			}
		})
	}
	// A GET read off the wire declares no length at all (fasthttp's -2): it has no body,
	// and is mirrored.
	wire := &fasthttp.RequestCtx{}
	if err := wire.Request.Read(bufio.NewReader(strings.NewReader("GET /wire HTTP/1.1\r\nHost: gw.test\r\n\r\n"))); err != nil {
		t.Fatal(err)
	}
	serve(t, instance(t, `{"host":"`+host+`"}`), wire, 1, false)
	if got := next(t, copies); got.target != "/wire" {
		t.Fatalf("the mirror got %+v", got)
	}
	// A request a plugin answered was not proxied: it is not mirrored either; the next
	// one is.
	m := instance(t, `{"host":"`+host+`"}`)
	serve(t, m, request("GET", "/answered", ""), 1, true)
	serve(t, m, request("GET", "/proxied", ""), 1, false)
	if got := next(t, copies); got.target != "/proxied" {
		t.Fatalf("the mirror got %+v", got)
	}
}

// TEST 17: sample_ratio 0.5 mirrors about half, decided by a hash of the start time so
// that the two phases of a request agree. The starts are fixed: the count is too.
func TestSampleRatio(t *testing.T) {
	m := instance(t, `{"host":"http://127.0.0.1:1","sample_ratio":0.5}`)
	n := 0
	for i := range 10000 {
		c := plugins.AcquireCtx(request("GET", "/", ""), &plugins.RouteInfo{}, int64(1_700_000_000_000_000_000+i*1000))
		if m.sampled(c) {
			n++
		}
		plugins.ReleaseCtx(c)
	}
	if n < 4700 || n > 5300 {
		t.Fatalf("%d of 10000 sampled at 0.5", n)
	}
	if m := instance(t, `{"host":"http://127.0.0.1:1","sample_ratio":0.00001}`); m.threshold == 0 {
		t.Fatal("the smallest ratio samples nothing")
	}
}

// A mirror that never answers holds no request: the log phase hands copies over and
// returns, the senders wait on the mirror, and what does not fit their queue is dropped.
// Memory stays within the budget all the while.
func TestSlowMirrorDelaysNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts, reads nothing, answers nothing
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	m := instance(t, `{"host":"http://`+ln.Addr().String()+`"}`)
	before := dropped.Load()
	body := strings.Repeat("b", 64<<10)
	for range queueLen + senders + 300 {
		serve(t, m, request("POST", "/slow", body), 1, false)
		if used := inUse.Load(); used > budget {
			t.Fatalf("%d bytes of copies held, over the %d budget", used, budget)
		}
	}
	if dropped.Load() == before {
		t.Fatal("no copy dropped with the senders stuck and the queue full")
	}
}

// The log phase's copy allocates nothing once the pools are warm; the mirror is a
// fasthttp server, which allocates nothing either (AllocsPerRun counts every goroutine).
func TestLogAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(*fasthttp.RequestCtx) {}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	m := instance(t, `{"host":"http://`+ln.Addr().String()+`","path":"/m","path_concat_mode":"prefix"}`)
	ctx := request("GET", "/hello?a=1", "", "X-A", "a-value")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 1)
	defer plugins.ReleaseCtx(c)
	// Warm up until every sender has its connection.
	for range 5000 {
		m.Log(c)
	}
	for inUse.Load() != 0 { // every copy sent or dropped
		time.Sleep(time.Millisecond)
	}
	allocs := testing.AllocsPerRun(2000, func() { m.Log(c) })
	if allocs != 0 {
		t.Fatalf("%.1f allocations per copy", allocs)
	}
}

func BenchmarkLog(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(*fasthttp.RequestCtx) {}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	m := instance(b, `{"host":"http://`+ln.Addr().String()+`"}`)
	c := plugins.AcquireCtx(request("GET", "/hello?a=1", "", "X-A", "a-value"), &plugins.RouteInfo{ID: "1"}, 1)
	defer plugins.ReleaseCtx(c)
	b.ReportAllocs()
	for b.Loop() {
		m.Log(c)
	}
}
