package accesslog

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
)

// recorder is a sink that keeps every write, so tests can see write(2) boundaries.
type recorder struct {
	mu       sync.Mutex
	writes   []string
	closed   bool
	failWith error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failWith != nil {
		return 0, r.failWith
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func openRecorded(t testing.TB, cfg conf.AccessLog, rec *recorder) *Logger {
	t.Helper()
	l, err := open(cfg, "recorded.log", func(string) (io.WriteCloser, error) { return rec, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newCtx parses raw as the server would and lets respond fill in the response.
func newCtx(t testing.TB, raw string, peer net.Addr, respond func(*fasthttp.RequestCtx)) *fasthttp.RequestCtx {
	t.Helper()
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("parsing %q: %v", raw, err)
	}
	if peer == nil {
		peer = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 5555}
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, peer, nil)
	if respond != nil {
		respond(ctx)
	}
	return ctx
}

func TestLines(t *testing.T) {
	utc := time.Date(2026, 11, 29, 18, 40, 0, 0, time.UTC)
	india := time.Date(2026, 3, 1, 7, 5, 9, 0, time.FixedZone("IST", 5*3600+1800))
	body := func(s string) func(*fasthttp.RequestCtx) {
		return func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(s) }
	}
	proxied := func(e *Entry) {
		e.RemoteAddr = []byte("203.0.113.9")
		e.UpstreamAddr = []byte("127.0.0.1:1980")
		e.UpstreamNanos = 10_400_000
		e.RouteID = "r1"
	}
	tests := []struct {
		name     string
		now      time.Time
		raw      string
		peer     net.Addr
		respond  func(*fasthttp.RequestCtx)
		entry    func(*Entry)
		combined string
		json     string
	}{{
		name:     "proxied GET with query, referer and user agent",
		now:      utc,
		raw:      "GET /api/v1?x=1&y=%20 HTTP/1.1\r\nHost: gw\r\nReferer: http://r.example/\r\nUser-Agent: curl/8.5.0\r\n\r\n",
		respond:  body("1234567890"),
		entry:    proxied,
		combined: `203.0.113.9 - - [29/Nov/2026:18:40:00 +0000] "GET /api/v1?x=1&y=%20 HTTP/1.1" 200 10 "http://r.example/" "curl/8.5.0"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"203.0.113.9","method":"GET","uri":"/api/v1?x=1&y=%20","protocol":"HTTP/1.1","status":200,"bytes_sent":10,"request_time":0.012,"upstream_addr":"127.0.0.1:1980","upstream_response_time":0.010,"route_id":"r1","referer":"http://r.example/","user_agent":"curl/8.5.0"}`,
	}, {
		name: "404 over HTTP/1.0 without headers logs the TCP peer",
		now:  utc,
		raw:  "GET /nope HTTP/1.0\r\n\r\n",
		respond: func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			ctx.SetBodyString(`{"error_msg":"404 Route Not Found"}` + "\n")
		},
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /nope HTTP/1.0" 404 36 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/nope","protocol":"HTTP/1.0","status":404,"bytes_sent":36,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name:     "HEAD sends no body whatever the handler set",
		now:      utc,
		raw:      "HEAD /file HTTP/1.1\r\nHost: gw\r\nUser-Agent: probe\r\n\r\n",
		respond:  body("1234567890"),
		entry:    proxied,
		combined: `203.0.113.9 - - [29/Nov/2026:18:40:00 +0000] "HEAD /file HTTP/1.1" 200 0 "-" "probe"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"203.0.113.9","method":"HEAD","uri":"/file","protocol":"HTTP/1.1","status":200,"bytes_sent":0,"request_time":0.012,"upstream_addr":"127.0.0.1:1980","upstream_response_time":0.010,"route_id":"r1","referer":null,"user_agent":"probe"}`,
	}, {
		name: "quotes, backslashes, control and non-ASCII bytes are escaped",
		now:  utc,
		raw:  "GET /a\"b%22 HTTP/1.1\r\nHost: gw\r\nReferer: x\"y\\z\r\n\r\n",
		respond: func(ctx *fasthttp.RequestCtx) {
			ctx.Request.Header.SetUserAgentBytes([]byte("tab\there\x01\x7f é \xff\""))
		},
		entry:    func(e *Entry) { e.RouteID = `r"1` },
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /a\x22b%22 HTTP/1.1" 200 0 "x\x22y\x5Cz" "tab\x09here\x01\x7F \xC3\xA9 \xFF\x22"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/a\"b%22","protocol":"HTTP/1.1","status":200,"bytes_sent":0,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":"r\"1","referer":"x\"y\\z","user_agent":"tab\there\u0001` + "\x7f" + ` é \ufffd\""}`,
	}, {
		name:     "Basic auth names the remote user",
		now:      utc,
		raw:      "GET / HTTP/1.1\r\nHost: gw\r\nAuthorization: Basic " + base64.StdEncoding.EncodeToString([]byte("alice:secret")) + "\r\n\r\n",
		combined: `192.0.2.7 - alice [29/Nov/2026:18:40:00 +0000] "GET / HTTP/1.1" 200 0 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/","protocol":"HTTP/1.1","status":200,"bytes_sent":0,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name: "streamed body counts its Content-Length",
		now:  utc,
		raw:  "GET /s HTTP/1.1\r\nHost: gw\r\n\r\n",
		respond: func(ctx *fasthttp.RequestCtx) {
			ctx.SetBodyStream(strings.NewReader("hello"), 5)
		},
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /s HTTP/1.1" 200 5 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/s","protocol":"HTTP/1.1","status":200,"bytes_sent":5,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name: "streamed body cut short counts what went out",
		now:  utc,
		raw:  "GET /s HTTP/1.1\r\nHost: gw\r\n\r\n",
		respond: func(ctx *fasthttp.RequestCtx) {
			ctx.SetBodyStream(strings.NewReader("hello"), 5)
		},
		entry:    func(e *Entry) { e.StreamedBody, e.BodyBytesSent = true, 3 },
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /s HTTP/1.1" 200 3 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/s","protocol":"HTTP/1.1","status":200,"bytes_sent":3,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name: "chunked stream of unknown size counts 0",
		now:  utc,
		raw:  "GET /c HTTP/1.1\r\nHost: gw\r\n\r\n",
		respond: func(ctx *fasthttp.RequestCtx) {
			ctx.SetBodyStream(strings.NewReader("hello"), -1)
		},
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /c HTTP/1.1" 200 0 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/c","protocol":"HTTP/1.1","status":200,"bytes_sent":0,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name: "304 carries no body",
		now:  utc,
		raw:  "GET /n HTTP/1.1\r\nHost: gw\r\n\r\n",
		respond: func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			ctx.SetBodyString("stale")
		},
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /n HTTP/1.1" 304 0 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/n","protocol":"HTTP/1.1","status":304,"bytes_sent":0,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name:     "local time zone and an IPv6 peer",
		now:      india,
		raw:      "POST /p HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n",
		peer:     &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443},
		respond:  body("ok"),
		combined: `2001:db8::1 - - [01/Mar/2026:07:05:09 +0530] "POST /p HTTP/1.1" 200 2 "-" "-"`,
		json:     `{"time":"2026-03-01T07:05:09+05:30","remote_addr":"2001:db8::1","method":"POST","uri":"/p","protocol":"HTTP/1.1","status":200,"bytes_sent":2,"request_time":0.012,"upstream_addr":null,"upstream_response_time":null,"route_id":null,"referer":null,"user_agent":null}`,
	}, {
		name: "slow request and an instant upstream",
		now:  utc,
		raw:  "GET /slow HTTP/1.1\r\nHost: gw\r\n\r\n",
		entry: func(e *Entry) {
			e.StartNanos = utc.UnixNano() - 65_432_100_000
			e.UpstreamAddr = []byte("10.0.0.2:8080")
			e.UpstreamNanos = 0
		},
		respond:  func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusGatewayTimeout) },
		combined: `192.0.2.7 - - [29/Nov/2026:18:40:00 +0000] "GET /slow HTTP/1.1" 504 0 "-" "-"`,
		json:     `{"time":"2026-11-29T18:40:00Z","remote_addr":"192.0.2.7","method":"GET","uri":"/slow","protocol":"HTTP/1.1","status":504,"bytes_sent":0,"request_time":65.432,"upstream_addr":"10.0.0.2:8080","upstream_response_time":0.000,"route_id":null,"referer":null,"user_agent":null}`,
	}}
	for _, tc := range tests {
		for _, format := range []string{"combined", "json"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				ctx := newCtx(t, tc.raw, tc.peer, tc.respond)
				e := Entry{Ctx: ctx, StartNanos: tc.now.UnixNano() - 12_345_678, UpstreamNanos: -1}
				if tc.entry != nil {
					tc.entry(&e)
				}
				rec := &recorder{}
				l := openRecorded(t, conf.AccessLog{Enabled: true, Format: format}, rec)
				l.now = func() time.Time { return tc.now }
				l.Log(&e)

				want := tc.combined
				if format == "json" {
					want = tc.json
				}
				got := rec.all()
				if len(got) != 1 || got[0] != want+"\n" {
					t.Fatalf("unbuffered Log wrote %q\nwant one write of %q", got, want+"\n")
				}
				if format == "json" {
					var fields map[string]any
					if err := json.Unmarshal([]byte(got[0]), &fields); err != nil {
						t.Fatalf("line is not JSON: %v", err)
					}
					if len(fields) != 13 {
						t.Fatalf("line has %d keys, want 13", len(fields))
					}
				}
				if ctx.Response.IsBodyStream() {
					if b, _ := io.ReadAll(ctx.Response.BodyStream()); string(b) != "hello" {
						t.Fatalf("Log consumed the body stream; %q left", b)
					}
				}
			})
		}
	}
}

func TestRemoteUser(t *testing.T) {
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	long := strings.Repeat("u", 100)
	tests := []struct {
		name, auth, want string
	}{
		{"no header", "", "-"},
		{"user and password", basic("alice:secret"), "alice"},
		{"scheme in any case, extra spaces", "bASIC   " + base64.StdEncoding.EncodeToString([]byte("alice:secret")), "alice"},
		{"empty password", basic("alice:"), "alice"},
		{"password holding a colon", basic("carol:a:b"), "carol"},
		{"unpadded", "Basic " + base64.RawStdEncoding.EncodeToString([]byte("bob:x")), "bob"},
		{"anything after padding ignored", basic("dave:pw1") + "==garbage", "dave"},
		{"user spanning decode blocks", basic(long + ":pw"), long},
		{"colon at a block boundary", basic(strings.Repeat("v", 48) + ":pw"), strings.Repeat("v", 48)},
		{"user escaped as nginx does", basic("a\"b\x01:pw"), `a\x22b\x01`},
		{"no colon", basic("alice"), "-"},
		{"empty user", basic(":secret"), "-"},
		{"no colon in a long credential", basic(long), "-"},
		{"character outside base64", basic("alice:secret") + "!", "-"},
		{"newline inside the credential", "Basic YWxp\nY2U6c2VjcmV0", "-"},
		{"impossible length", "Basic YWxpY", "-"},
		{"scheme only", "Basic ", "-"},
		{"scheme without space", "Basic", "-"},
		{"other scheme", "Bearer " + base64.StdEncoding.EncodeToString([]byte("alice:secret")), "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendRemoteUser([]byte("x "), []byte(tc.auth)))
			if got != "x "+tc.want {
				t.Fatalf("remote user of %q = %q, want %q", tc.auth, got[2:], tc.want)
			}
		})
	}
}

func TestEscapes(t *testing.T) {
	tests := []struct {
		in, nginx, json string
	}{
		{"", "", ""},
		{"plain /path?q=1", "plain /path?q=1", "plain /path?q=1"},
		{`"\`, `\x22\x5C`, `\"\\`},
		{"\x00\x1f\n\r\t\b", `\x00\x1F\x0A\x0D\x09\x08`, `\u0000\u001f\n\r\t\u0008`},
		{"\x7f", `\x7F`, "\x7f"},
		{"é€😀", `\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80`, "é€😀"},
		{"a\xffb\xc3", `a\xFFb\xC3`, `a\ufffdb\ufffd`},
		{"\xed\xa0\x80", `\xED\xA0\x80`, `\ufffd\ufffd\ufffd`}, // a surrogate is not UTF-8
	}
	for _, tc := range tests {
		if got := string(appendNginx(nil, []byte(tc.in))); got != tc.nginx {
			t.Errorf("nginx escape of %q = %q, want %q", tc.in, got, tc.nginx)
		}
		got := string(appendJSONEscaped(nil, []byte(tc.in)))
		if got != tc.json {
			t.Errorf("JSON escape of %q = %q, want %q", tc.in, got, tc.json)
		}
		if !json.Valid([]byte(`"` + got + `"`)) {
			t.Errorf("JSON escape of %q is not a valid JSON string: %q", tc.in, got)
		}
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		nanos int64
		want  string
	}{
		{0, "0.000"},
		{999_999, "0.000"},
		{1_000_000, "0.001"},
		{12_345_678, "0.012"},
		{1_234_567_890, "1.234"},
		{61_000_000_000, "61.000"},
		{-5_000_000, "0.000"},
	}
	for _, tc := range tests {
		if got := string(appendSeconds(nil, tc.nanos)); got != tc.want {
			t.Errorf("appendSeconds(%d) = %q, want %q", tc.nanos, got, tc.want)
		}
	}
}
