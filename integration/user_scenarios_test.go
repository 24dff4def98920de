package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The scenarios of seeds 001 (Ocelot), 002 (APISIX on Graviton) and 004 (Kong, with its
// "simple nginx use case + auth"), through real workers and real upstream servers.

// echoUpstream answers every request with what it received: X-Seen-Path (the request
// line's URI), X-Seen-Method, X-Seen-Host and X-Seen-<name> for each of names.
func echoUpstream(t *testing.T, names ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Path", r.RequestURI)
		w.Header().Set("X-Seen-Method", r.Method)
		w.Header().Set("X-Seen-Host", r.Host)
		for _, name := range names {
			w.Header().Set("X-Seen-"+name, strings.Join(r.Header.Values(name), ","))
		}
		io.WriteString(w, `["value1","value2"]`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func (in *instance) mustPut(path, body string) {
	in.t.Helper()
	status, resp := in.adminCall("PUT", path, body)
	if status != 200 && status != 201 {
		in.t.Fatalf("PUT %s: %d %s", path, status, resp)
	}
}

// Seed 001: Ocelot's /api1/values -> the API's /api/values, then ab -n 20000 -c 1000 with
// no failed request.
func TestOcelotRewriteUnderLoad(t *testing.T) {
	node := echoUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{
		"uri": "/api1/values",
		"plugins": {"proxy-rewrite": {"uri": "/api/values"}},
		"upstream": {"type": "roundrobin", "nodes": {%q: 1}}
	}`, node))

	resp, body := in.get("/api1/values?page=2")
	if resp.StatusCode != 200 || body != `["value1","value2"]` {
		t.Fatalf("GET /api1/values: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Seen-Path"); got != "/api/values?page=2" {
		t.Errorf("upstream saw %q, want /api/values?page=2", got)
	}

	const requests, concurrency = 20000, 1000
	url := "http://" + in.data + "/api1/values"
	if ab, err := exec.LookPath("ab"); err == nil {
		out, err := exec.Command(ab, "-q", "-n", fmt.Sprint(requests), "-c", fmt.Sprint(concurrency), "-s", "30", url).CombinedOutput()
		if err != nil {
			t.Fatalf("ab: %v\n%s", err, out)
		}
		report := string(out)
		for _, want := range []string{
			fmt.Sprintf("Complete requests:      %d", requests),
			"Failed requests:        0",
		} {
			if !strings.Contains(report, want) {
				t.Errorf("ab report lacks %q:\n%s", want, report)
			}
		}
		if strings.Contains(report, "Non-2xx responses") {
			t.Errorf("ab saw non-2xx responses:\n%s", report)
		}
		t.Logf("ab: %s", regexp.MustCompile(`Requests per second:.*`).FindString(report))
		return
	}
	// Without ab: as ab does, each request on a new connection, 1000 at a time.
	var failed, ok atomic.Int64
	var firstErr atomic.Value
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for c := 0; c < concurrency; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < requests/concurrency; i++ {
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 || ok.Load() != requests {
		t.Errorf("%d ok, %d failed (first: %v)", ok.Load(), failed.Load(), firstErr.Load())
	}
}

// Seed 004 (Kong): a route on /hello/* whose upstream sees the path without /hello, and a
// rate limit per hour.
func TestKongStripPrefixAndHourlyLimit(t *testing.T) {
	node := echoUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{
		"uri": "/hello/*",
		"plugins": {
			"proxy-rewrite": {"regex_uri": ["^/hello/(.*)", "/$1"]},
			"limit-count": {"count": 999999999999, "time_window": 3600, "key": "remote_addr", "policy": "local"},
			"prometheus": {}
		},
		"upstream": {"type": "roundrobin", "nodes": {%q: 1}}
	}`, node))
	for path, want := range map[string]string{
		"/hello/hello":    "/hello",
		"/hello/a/b?x=1":  "/a/b?x=1",
		"/hello/":         "/",
		"/hello/%7Euser/": "/~user/",
	} {
		resp, _ := in.get(path)
		if resp.StatusCode != 200 || resp.Header.Get("X-Seen-Path") != want {
			t.Errorf("GET %s: %d, upstream saw %q; want %q", path, resp.StatusCode, resp.Header.Get("X-Seen-Path"), want)
		}
		if resp.Header.Get("X-RateLimit-Limit") != "999999999999" {
			t.Errorf("GET %s: X-RateLimit-Limit = %q", path, resp.Header.Get("X-RateLimit-Limit"))
		}
	}

	// The hourly window really limits: 2 per hour, the third is refused.
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{
		"uri": "/hourly/*",
		"plugins": {
			"proxy-rewrite": {"regex_uri": ["^/hourly/(.*)", "/$1"]},
			"limit-count": {"count": 2, "time_window": 3600, "rejected_code": 429}
		},
		"upstream": {"type": "roundrobin", "nodes": {%q: 1}}
	}`, node))
	var statuses []int
	for range 3 {
		resp, _ := in.get("/hourly/x")
		statuses = append(statuses, resp.StatusCode)
	}
	if fmt.Sprint(statuses) != "[200 200 429]" {
		t.Errorf("statuses = %v, want [200 200 429]", statuses)
	}
}

// Seed 002: /anything/* with the node given by host name.
func TestNodeByHostName(t *testing.T) {
	node := echoUpstream(t)
	_, port, _ := net.SplitHostPort(node)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{
		"uri": "/anything/*",
		"upstream": {"type": "roundrobin", "nodes": {"localhost:%s": 1}}
	}`, port))
	resp, body := in.get("/anything/das")
	if resp.StatusCode != 200 || body != `["value1","value2"]` || resp.Header.Get("X-Seen-Path") != "/anything/das" {
		t.Fatalf("GET /anything/das: %d %q, upstream saw %q", resp.StatusCode, body, resp.Header.Get("X-Seen-Path"))
	}
	if resp, _ := in.get("/anything"); resp.StatusCode != 404 {
		t.Errorf("GET /anything = %d, want 404 (the prefix is /anything/)", resp.StatusCode)
	}
}

// Seed 004's "simple nginx use case + auth": consumers with key-auth and basic-auth,
// accepted and rejected by real workers, the consumer's name reaching limit-count's key
// and prometheus's label.
func TestKeyAuthAndBasicAuth(t *testing.T) {
	node := echoUpstream(t, "Apikey", "Authorization")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`)
	in.mustPut("/apisix/admin/consumers/jill", `{"username":"jill","plugins":{"key-auth":{"key":"auth-two"},"basic-auth":{"username":"jill","password":"s3cret"}}}`)
	if status, body := in.adminCall("PUT", "/apisix/admin/consumers", `{"username":"copy","plugins":{"key-auth":{"key":"auth-one"}}}`); status != 400 ||
		!strings.Contains(body, "duplicate key of plugin key-auth found with consumer: jack") {
		t.Errorf("a second consumer with jack's key: %d %s", status, body)
	}
	if status, _ := in.adminCall("POST", "/apisix/admin/consumers", `{"username":"x"}`); status != 405 {
		t.Errorf("POST consumers = %d, want 405", status)
	}
	in.mustPut("/apisix/admin/routes/key", fmt.Sprintf(`{
		"uri": "/key",
		"plugins": {
			"key-auth": {},
			"limit-count": {"count": 2, "time_window": 60, "key": "consumer_name", "rejected_code": 503},
			"prometheus": {}
		},
		"upstream": {"type": "roundrobin", "nodes": {%q: 1}}
	}`, node))
	in.mustPut("/apisix/admin/routes/basic", fmt.Sprintf(`{
		"uri": "/basic",
		"plugins": {"basic-auth": {"hide_credentials": true}},
		"upstream": {"type": "roundrobin", "nodes": {%q: 1}}
	}`, node))

	type exchange struct {
		path      string
		headers   []string
		status    int
		body      string // the whole body of a 401, or "" for a proxied answer
		challenge string
	}
	for _, x := range []exchange{
		{"/key", nil, 401, `{"message":"Missing API key in request"}`, `apikey realm="key"`},
		{"/key", []string{"apikey", "wrong"}, 401, `{"message":"Invalid API key in request"}`, `apikey realm="key"`},
		{"/key?apikey=wrong", nil, 401, `{"message":"Invalid API key in request"}`, `apikey realm="key"`},
		{"/key", []string{"apikey", "auth-one"}, 200, "", ""},
		{"/key?apikey=auth-one", nil, 200, "", ""},
		{"/key", []string{"apikey", "auth-one"}, 503, "", ""}, // jack's third in the window
		{"/key", []string{"apikey", "auth-two"}, 200, "", ""}, // jill counts apart
		{"/basic", nil, 401, `{"message":"Missing authorization in request"}`, `Basic realm="basic"`},
		{"/basic", []string{"Authorization", "Bearer x"}, 401, `{"message":"Invalid authorization in request"}`, `Basic realm="basic"`},
		{"/basic", []string{"Authorization", basicAuth("jill", "wrong")}, 401, `{"message":"Invalid user authorization"}`, `Basic realm="basic"`},
		{"/basic", []string{"Authorization", basicAuth("jack", "s3cret")}, 401, `{"message":"Invalid user authorization"}`, `Basic realm="basic"`},
		{"/basic", []string{"Authorization", basicAuth("jill", "s3cret")}, 200, "", ""},
	} {
		resp, body := in.get(x.path, x.headers...)
		if resp.StatusCode != x.status {
			t.Errorf("GET %s %v: %d %q, want %d", x.path, x.headers, resp.StatusCode, body, x.status)
			continue
		}
		if x.status == 401 {
			if strings.TrimSpace(body) != x.body || resp.Header.Get("WWW-Authenticate") != x.challenge {
				t.Errorf("GET %s %v: %q, WWW-Authenticate %q; want %q, %q", x.path, x.headers, body,
					resp.Header.Get("WWW-Authenticate"), x.body, x.challenge)
			}
		}
		if x.status == 200 && x.path == "/basic" && resp.Header.Get("X-Seen-Authorization") != "" {
			t.Errorf("hide_credentials: upstream still saw Authorization %q", resp.Header.Get("X-Seen-Authorization"))
		}
		if x.status == 200 && x.path == "/key" && resp.Header.Get("X-Seen-Apikey") == "" {
			t.Error("without hide_credentials the upstream should see the apikey header")
		}
	}

	_, metrics := getOn(t, in.metrics, "/apisix/prometheus/metrics")
	for _, consumer := range []string{`consumer="jack"`, `consumer="jill"`} {
		if !strings.Contains(metrics, consumer) {
			t.Errorf("metrics have no series with %s:\n%s", consumer, lastLines(metrics, 30))
		}
	}

	// Deleting a consumer takes its key away at once (read-your-writes).
	if status, body := in.adminCall("DELETE", "/apisix/admin/consumers/jill", ""); status != 200 {
		t.Fatalf("DELETE jill: %d %s", status, body)
	}
	if resp, _ := in.get("/key", "apikey", "auth-two"); resp.StatusCode != 401 {
		t.Errorf("jill's key after her deletion: %d, want 401", resp.StatusCode)
	}
}

func basicAuth(user, password string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, password)
	return req.Header.Get("Authorization")
}

// A consumer's own plugins (not its credentials) merge into the chain of every route that
// names it, the consumer's configuration of a plugin winning over the route's, as APISIX's
// merge_consumer_route: jack gets two requests a minute and a header, rose the route's
// limit; a global rule's key-auth names the consumer just as well.
func TestConsumerPlugins(t *testing.T) {
	node := echoUpstream(t, "X-Consumer")
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"},`+
		`"limit-count":{"count":2,"time_window":60,"rejected_code":429,"key":"consumer_name"},`+
		`"proxy-rewrite":{"headers":{"set":{"X-Consumer":"jack"}}}}}`)
	in.mustPut("/apisix/admin/consumers", `{"username":"rose","plugins":{"key-auth":{"key":"rose-key"}}}`)
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/c","plugins":{"key-auth":{},
		"limit-count":{"count":4,"time_window":60,"rejected_code":503,"key":"consumer_name"}},
		"upstream":{"nodes":{%q:1}}}`, node))
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/open","upstream":{"nodes":{%q:1}}}`, node))

	// statuses makes n requests and returns their statuses and the first one's X-Consumer
	// as the upstream saw it.
	statuses := func(path, key string, n int) (got []int, header string) {
		for i := range n {
			resp, _ := in.get(path, "apikey", key)
			got = append(got, resp.StatusCode)
			if i == 0 {
				header = resp.Header.Get("X-Seen-X-Consumer")
			}
		}
		return got, header
	}
	if got, header := statuses("/c", "jack-key", 3); !slices.Equal(got, []int{200, 200, 429}) || header != "jack" {
		t.Errorf("jack on /c: %v with X-Consumer %q, want [200 200 429] (his own limit replaces the route's) and jack", got, header)
	}
	if resp, _ := in.get("/c?x=1", "apikey", "rose-key"); resp.Header.Get("X-Seen-X-Consumer") != "" {
		t.Errorf("rose got jack's header")
	}
	if got, _ := statuses("/c", "rose-key", 4); !slices.Equal(got, []int{200, 200, 200, 503}) {
		t.Errorf("rose on /c: %v, want [200 200 200 503] (the route's limit of 4, one used above)", got)
	}
	// A route without auth never names jack: his plugins do not apply there.
	if got, _ := statuses("/open", "jack-key", 3); !slices.Equal(got, []int{200, 200, 200}) {
		t.Errorf("jack on /open without auth: %v", got)
	}
	// With key-auth as a global rule, /open names jack too, and his header comes along.
	in.mustPut("/apisix/admin/global_rules/1", `{"plugins":{"key-auth":{}}}`)
	resp, _ := in.get("/open", "apikey", "jack-key")
	if resp.StatusCode != 200 || resp.Header.Get("X-Seen-X-Consumer") != "jack" {
		t.Errorf("jack on /open under a key-auth global rule: %d, X-Consumer %q, want 200 and jack", resp.StatusCode, resp.Header.Get("X-Seen-X-Consumer"))
	}
}

// proxy-rewrite's host is the Host the upstream sees whatever the upstream's pass_host, as
// APISIX's upstream_host; X-Forwarded-Host and $host keep the client's.
func TestProxyRewriteHostWinsOverPassHost(t *testing.T) {
	node := echoUpstream(t, "X-Forwarded-Host", "X-Client-Host")
	in := newInstance(t, "")
	in.start("--workers", "1")
	for i, passHost := range []string{`"pass_host":"pass"`, `"pass_host":"node"`, `"pass_host":"rewrite","upstream_host":"up.example"`} {
		in.mustPut(fmt.Sprintf("/apisix/admin/routes/%d", i), fmt.Sprintf(`{"uri":"/h%d",
			"plugins":{"proxy-rewrite":{"host":"chosen.example","headers":{"set":{"X-Client-Host":"$host"}}}},
			"upstream":{"nodes":{%q:1},%s}}`, i, node, passHost))
		resp, _ := in.get(fmt.Sprintf("/h%d", i), "Host", "client.example")
		got := []string{resp.Header.Get("X-Seen-Host"), resp.Header.Get("X-Seen-X-Forwarded-Host"), resp.Header.Get("X-Seen-X-Client-Host")}
		if want := []string{"chosen.example", "client.example", "client.example"}; !slices.Equal(got, want) {
			t.Errorf("%s: upstream saw Host, X-Forwarded-Host, $host = %q, want %q", passHost, got, want)
		}
	}
}
