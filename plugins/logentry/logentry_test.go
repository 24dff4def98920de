package logentry

import (
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

func TestAppendStringIsJSON(t *testing.T) {
	for _, s := range []string{"plain", `q"b\`, "tab\tnl\ncr\r", "\x00\x1f\x7f", "é€😀", "bad\xff\xfe utf8"} {
		var back string
		out := appendString(nil, s)
		if err := json.Unmarshal(out, &back); err != nil {
			t.Errorf("%q -> %s: %v", s, out, err)
			continue
		}
		if want := string([]rune(s)); back != want && s != "bad\xff\xfe utf8" {
			t.Errorf("%q -> %s -> %q", s, out, back)
		}
	}
	if got := string(appendString(nil, "bad\xffx")); got != `"bad\ufffdx"` {
		t.Errorf("invalid UTF-8: %s", got)
	}
}

func ctx() *plugins.Ctx {
	r := &fasthttp.RequestCtx{}
	r.Request.SetRequestURI("/p?x=%41&y&x=2&z=a+b")
	r.Request.Header.SetHost("Gw.Test:1")
	r.Request.Header.Add("X-Dup", "1")
	r.Request.Header.Add("X-Dup", "2")
	r.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1})
	return plugins.AcquireCtx(r, &plugins.RouteInfo{ID: "r"}, time.Now().UnixNano())
}

func TestHeadersAndQuery(t *testing.T) {
	c := ctx()
	defer plugins.ReleaseCtx(c)
	var s Scratch
	var e map[string]any
	if err := json.Unmarshal(AppendDefault(nil, c, Options{}, &s), &e); err != nil {
		t.Fatal(err)
	}
	req := e["request"].(map[string]any)
	q, _ := json.Marshal(req["querystring"])
	if string(q) != `{"x":["A","2"],"y":true,"z":"a b"}` {
		t.Errorf("querystring = %s", q)
	}
	h, _ := json.Marshal(req["headers"].(map[string]any)["x-dup"])
	if string(h) != `["1","2"]` {
		t.Errorf("x-dup = %s", h)
	}
	if e["client_ip"] != "::1" || e["route_id"] != "r" || e["service_id"] != "" {
		t.Errorf("entry = %v", e)
	}
}

func TestFormatAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	var f *Format
	var err error
	_ = pluginconf.Compact.Each(json.RawMessage(`{"log_format":{"h":"$host","ip":"$remote_addr","t":"$time_iso8601","x":"text"}}`), func(m pluginconf.Member) error {
		f, err = ParseFormat(m)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := ctx()
	defer plugins.ReleaseCtx(c)
	buf := f.Append(nil, c)
	var e map[string]any
	if err := json.Unmarshal(buf, &e); err != nil || e["h"] != "gw.test" || e["ip"] != "::1" || e["x"] != "text" || e["route_id"] != "r" {
		t.Errorf("entry %s: %v", buf, err)
	}
	if allocs := testing.AllocsPerRun(200, func() { buf = f.Append(buf[:0], c) }); allocs != 0 {
		t.Errorf("Format.Append: %.1f allocations", allocs)
	}
}

// The response's variables are there in the log phase, as in nginx's access log.
func TestFormatReadsTheResponse(t *testing.T) {
	var f *Format
	var err error
	_ = pluginconf.Compact.Each(json.RawMessage(`{"log_format":{"s":"$status","ct":"$sent_http_content_type"}}`), func(m pluginconf.Member) error {
		f, err = ParseFormat(m)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := ctx()
	defer plugins.ReleaseCtx(c)
	c.Request.SetStatusCode(418)
	c.Request.Response.Header.SetContentType("text/x-test")
	var e map[string]any
	if buf := f.Append(nil, c); json.Unmarshal(buf, &e) != nil || e["s"] != "418" || e["ct"] != "text/x-test" {
		t.Errorf("entry %s", buf)
	}
}

// BenchmarkAppendDefault is the default entry of a request like the benchmark's (wrk's
// GET, a small upstream answer): the log phase's own work, without the processor.
func BenchmarkAppendDefault(b *testing.B) {
	r := &fasthttp.RequestCtx{}
	r.Request.SetRequestURI("/logged")
	r.Request.Header.SetHost("127.0.0.1:9080")
	r.Response.Header.Set("Content-Type", "text/plain; charset=utf-8")
	r.Response.Header.Set("Date", "Sun, 06 Dec 2026 08:00:00 GMT")
	r.Response.SetBodyString("hello world")
	r.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	c := plugins.AcquireCtx(r, &plugins.RouteInfo{ID: "2"}, time.Now().UnixNano()-5e6)
	defer plugins.ReleaseCtx(c)
	c.UpstreamNanos = 3e6
	c.Node = append(c.Node, "127.0.0.1:1980"...)
	var s Scratch
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendDefault(dst[:0], c, Options{Version: "3.9.0"}, &s)
	}
	b.SetBytes(int64(len(dst)))
}

// TestAppendStringEscapes checks each escape at the start, middle and end of a run.
func TestAppendStringEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"":                 `""`,
		"abc":              `"abc"`,
		`"a`:               `"\"a"`,
		`a\`:               `"a\\"`,
		"a\nb\rc\td":       `"a\nb\rc\td"`,
		"\x00a\x1fb\x7f":   `"\u0000a\u001fb\u007f"`,
		"é€😀x":             `"é€😀x"`,
		"\xffa\xfe":        `"\ufffda\ufffd"`,
		"a\xe2\x82":        `"a\ufffd\ufffd"`, // a cut 3-byte sequence
		"x\xe2\x82\xacy\"": `"x€y\""`,
	} {
		if got := string(appendString([]byte("p"), in)); got != "p"+want {
			t.Errorf("appendString(%q) = %s, want %s", in, got[1:], want)
		}
		if got := string(appendString(nil, []byte(in))); got != want {
			t.Errorf("appendString([]byte(%q)) = %s, want %s", in, got, want)
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := []byte("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")
	var dst []byte
	for b.Loop() {
		dst = appendString(dst[:0], s)
	}
}

// appendMillis writes what AppendFloat writes for the same milliseconds.
func TestAppendMillis(t *testing.T) {
	for _, ns := range []int64{0, 1, 10, 999, 1000, 1_000_000, 1_000_001, 3_000_000, 5_123_456, 12_300_000,
		999_999_999, 1_234_567_891, 86_400_000_000_000} {
		want := strconv.AppendFloat(nil, float64(ns)/1e6, 'f', -1, 64)
		if got := appendMillis([]byte("x"), ns); string(got) != "x"+string(want) {
			t.Errorf("appendMillis(%d) = %s, want %s", ns, got[1:], want)
		}
	}
}

func BenchmarkAppendMillis(b *testing.B) {
	var dst []byte
	for b.Loop() {
		dst = appendMillis(dst[:0], 5_123_456)
	}
}
