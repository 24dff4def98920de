package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Routes on the request body (post_arg), through real workers: the route is chosen on
// the body, and the upstream receives that body byte for byte, whether the client sent a
// Content-Length or chunks. Cases from APISIX's t/admin/routes_request_body.t (TEST 1-12)
// and t/node/vars.t (TEST 17-21).
func TestPostArgRouting(t *testing.T) {
	in := newInstance(t, "")
	in.start()
	nodes := map[string]string{}
	for _, name := range []string{"deepseek", "openai", "image", "form", "fallback"} {
		nodes[name] = startEchoUpstream(t, name)
	}
	put := func(id, name, route string) {
		t.Helper()
		body := strings.TrimSuffix(route, "}") + fmt.Sprintf(`,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, nodes[name])
		in.mustPut("/apisix/admin/routes/"+id, body)
	}
	put("1", "deepseek", `{"uri":"/hello","priority":2,"vars":[[["post_arg.model","==","deepseek"]]]}`)
	put("2", "openai", `{"uri":"/hello","priority":1,"vars":[[["post_arg.model","==","openai"]]]}`)
	put("3", "image", `{"uri":"/hello","priority":3,"vars":[["post_arg.messages[*].content[*].type","has","image_url"]]}`)
	put("4", "form", `{"uri":"/form","vars":[["post_arg_k","==","post_form"]]}`)
	put("5", "fallback", `{"uri":"/*"}`)

	const multipart = "--testboundary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nopenai\r\n--testboundary--\r\n"
	tests := []struct {
		path, contentType, body, want string
	}{
		{"/hello", "application/json", `{ "model":"deepseek", "messages": [ { "role": "system", "content": "You are a mathematician" }] }`, "deepseek"},
		{"/hello", "application/json", `{ "model":"openai", "messages": [ { "role": "system", "content": "You are a mathematician" }] }`, "openai"},
		{"/hello", "application/x-www-form-urlencoded", `model=openai&messages[0][role]=system&messages[0][content]=You%20are%20a%20mathematician`, "openai"},
		{"/hello", "multipart/form-data; boundary=testboundary", multipart, "openai"},
		{"/hello", "", multipart, "fallback"}, // TEST 6: no Content-Type, no post_arg
		{"/hello", "application/json", `{ "model":"deepseek", "messages": [ { "role": "system", "content": [{"text":"x","type":"text"},{"text":"y","type":"image_url"}] }] }`, "image"},
		{"/hello", "application/json", `{"model":"openai"`, "fallback"}, // does not parse
		{"/form", "application/x-www-form-urlencoded", `k=post_form`, "form"},
		{"/form", "multipart/form-data", `k=post_form`, "fallback"},
		{"/form", "application/x-www-form-urlencoded", `k=post_form&` + strings.Repeat("x", 100_000), "form"},
	}
	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			status, got := post(t, in.data, tt.path, tt.contentType, tt.body, chunked)
			if want := tt.want + "\n" + tt.body; status != 200 || got != want {
				t.Errorf("POST %s (%s, chunked %v) %.60q: %d %.80q, want %s and the body as sent", tt.path, tt.contentType, chunked, tt.body, status, got, tt.want)
			}
		}
	}

	// An invalid path is a 400 naming the variable (TEST 10), and changes nothing.
	status, body := in.adminCall("PUT", "/apisix/admin/routes/2",
		`{"uri":"/hello","vars":[[["post_arg.messages[.content[*].type","has","image_url"]]],"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, `failed to validate the 'vars' expression`) || !strings.Contains(body, `post_arg.messages[.content[*].type`) {
		t.Errorf("invalid post_arg path: %d %s, want a 400 naming it", status, body)
	}
	if status, got := post(t, in.data, "/hello", "application/json", `{"model":"openai"}`, false); status != 200 || !strings.HasPrefix(got, "openai\n") {
		t.Errorf("after a refused write: %d %q, want openai", status, got)
	}
	// The other readers of variables take them too: a chash key on the body.
	in.mustPut("/apisix/admin/routes/6", fmt.Sprintf(`{"uri":"/chash","upstream":{"type":"chash","hash_on":"vars_combinations","key":"${post_arg.user}","nodes":{%q:1}}}`, nodes["form"]))
	if status, got := post(t, in.data, "/chash", "application/json", `{"user":"u1"}`, false); status != 200 || got != "form\n"+`{"user":"u1"}` {
		t.Errorf("chash on post_arg.user: %d %q", status, got)
	}
}

// startEchoUpstream answers every request with its name, a newline and the body it got.
func startEchoUpstream(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, name+"\n")
		w.Write(body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// post sends body to the data plane, with a Content-Length or, chunked, without one.
func post(t *testing.T, address, path, contentType, body string, chunked bool) (int, string) {
	t.Helper()
	var reader io.Reader = strings.NewReader(body)
	if chunked {
		reader = io.MultiReader(reader) // a length net/http cannot see: it sends chunks
	}
	req, err := http.NewRequest("POST", "http://"+address+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := freshConnections.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got)
}
