package proxy

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
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

// The fields a plugin added (Info.Added, request-id's) reach the node on the pristine path
// as prepareRequest sends them: once, in place of a client's empty one, not when the
// client's Connection names them, and one the proxy sets itself (X-Forwarded-For) goes the
// usual way. Each case's node sees the same fields whichever path the request took.
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
				var added [][]byte
				for i := 0; i+1 < len(tc.added); i += 2 { // as plugins.Ctx.AddNewRequestHeader does
					ctx.Request.Header.Set(tc.added[i], tc.added[i+1])
					added = append(added, []byte(tc.added[i]), []byte(tc.added[i+1]))
				}
				up.ForwardInfo(ctx, &Info{Pristine: pristine, Added: added})
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

// anyDropped: only a field the proxy drops or sets itself sends a request the usual way.
func TestAnyDropped(t *testing.T) {
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
		var added [][]byte
		for _, s := range tc.added {
			added = append(added, []byte(s))
		}
		if got := anyDropped(added); got != tc.want {
			t.Errorf("anyDropped(%q) = %v, want %v", tc.added, got, tc.want)
		}
	}
}
