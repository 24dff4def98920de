package router

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
)

// bodyRequest is a POST to path with body, read as gw's server reads one: the header,
// then the body as a stream.
func bodyRequest(tb testing.TB, path, contentType, body string) *fasthttp.RequestCtx {
	tb.Helper()
	raw := "POST " + path + " HTTP/1.1\r\nHost: x\r\n"
	if contentType != "" {
		raw += "Content-Type: " + contentType + "\r\n"
	}
	raw += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	ctx := &fasthttp.RequestCtx{}
	ctx.Init2(addrConn{local: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9080}, remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}}, quietLogger{}, true)
	br := bufio.NewReader(strings.NewReader(raw))
	if err := ctx.Request.Header.Read(br); err != nil {
		tb.Fatal(err)
	}
	if err := ctx.Request.ContinueReadBodyStream(br, 1<<20, false); err != nil {
		tb.Fatal(err)
	}
	return ctx
}

// Routes on the request body, from APISIX's t/admin/routes_request_body.t (TEST 1-9: two
// routes on post_arg.model; has over messages[*].content[*].type) and t/node/vars.t
// (TEST 17-21: post_arg_k on an urlencoded body).
func TestMatchCtxBody(t *testing.T) {
	r, err := Build([]Entry{
		{Paths: paths("/hello"), Priority: 2, Vars: mustVars(t, `[[["post_arg.model", "==", "deepseek"]]]`), Value: 1},
		{Paths: paths("/hello"), Priority: 1, Vars: mustVars(t, `[[["post_arg.model", "==", "openai"]]]`), Value: 2},
		{Paths: paths("/image"), Vars: mustVars(t, `[["post_arg.messages[*].content[*].type", "has", "image_url"]]`), Value: 3},
		{Paths: paths("/form"), Vars: mustVars(t, `[["post_arg_k", "==", "post_form"]]`), Value: 4},
		{Paths: paths("/n"), Vars: mustVars(t, `[["post_arg.n", ">", 2], ["post_arg.name", "~~", "^ab"]]`), Value: 5},
		{Paths: paths("/*"), Value: 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	const (
		json = "application/json"
		form = "application/x-www-form-urlencoded"
	)
	tests := []struct {
		path, contentType, body string
		want                    int
	}{
		{"/hello", json, `{ "model":"deepseek", "messages": [ { "role": "system", "content": "You are a mathematician" }] }`, 1},
		{"/hello", json, `{ "model":"openai", "messages": [ { "role": "system", "content": "You are a mathematician" }] }`, 2},
		{"/hello", form, `model=openai&messages[0][role]=system&messages[0][content]=You%20are%20a%20mathematician`, 2},
		{"/hello", "multipart/form-data; boundary=testboundary", "--testboundary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nopenai\r\n--testboundary--\r\n", 2},
		{"/hello", "", "--testboundary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nopenai\r\n--testboundary--\r\n", 9},
		{"/hello", json, `{"model":"openai"`, 9}, // does not parse
		{"/image", json, `{ "model":"deepseek", "messages": [ { "role": "system", "content": [{"text":"You are a mathematician","type":"text"}] }] }`, 9},
		{"/image", json, `{ "model":"deepseek", "messages": [ { "role": "system", "content": [{"text":"You are a mathematician","type":"text"},{"text":"You are a mathematician","type":"image_url"}] }] }`, 3},
		{"/form", form, `k=post_form`, 4},
		{"/form", "", `123`, 9},
		{"/form", "multipart/form-data", `k=post_form`, 9},
		{"/form", json, `{"k":"post_form"}`, 9}, // post_arg_ reads urlencoded bodies alone
		{"/n", json, `{"n":3,"name":"abc"}`, 5},
		{"/n", json, `{"n":"3.5","name":"abc"}`, 5},
		{"/n", json, `{"n":1,"name":"abc"}`, 9},
	}
	for _, tt := range tests {
		req := bodyRequest(t, tt.path, tt.contentType, tt.body)
		got, ok := r.MatchCtx(req.Method(), req.Host(), req.Path(), req)
		if !ok || got.Value != tt.want {
			t.Errorf("POST %s (%s) %q: MatchCtx = %d, %v; want %d", tt.path, tt.contentType, tt.body, got.Value, ok, tt.want)
		}
		if body := req.Request.Body(); string(body) != tt.body {
			t.Errorf("POST %s %q: the body to send is now %q", tt.path, tt.body, body)
		}
	}
}

// A route whose vars name no body variable leaves the body unread, streaming.
func TestMatchCtxLeavesBodyUnread(t *testing.T) {
	r, err := Build([]Entry{
		{Paths: paths("/a"), Vars: mustVars(t, `[["arg_a", "==", "1"]]`), Value: 1},
		{Paths: paths("/*"), Value: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := bodyRequest(t, "/a", "application/json", `{"a":"1"}`)
	if got, _ := r.MatchCtx(req.Method(), req.Host(), req.Path(), req); got.Value != 2 {
		t.Fatalf("MatchCtx = %d, want 2", got.Value)
	}
	if req.Request.BodyStream() == nil {
		t.Error("the body was read for a route that reads none of it")
	}
}

// Matching on the body, parse included, allocates nothing on a warm worker.
func TestMatchCtxBodyAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	r, err := Build([]Entry{{Paths: paths("/image"), Vars: mustVars(t, `[["post_arg.model", "==", "deepseek"], ["post_arg.messages[*].content[*].type", "has", "image_url"]]`), Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"deepseek","messages":[{"role":"user","content":[{"type":"text"},{"type":"image_url"}]}]}`)
	req := bodyRequest(t, "/image", "application/json", string(body))
	method, host, path := req.Method(), req.Host(), req.Path()
	allocs := testing.AllocsPerRun(100, func() {
		req.ResetUserValues() // a new request's body
		req.Request.SetBodyRaw(body)
		if v, ok := r.MatchCtx(method, host, path, req); !ok || v.Value != 1 {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per match, want 0", allocs)
	}
}
