package logentry

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
	route := &plugins.RouteInfo{ID: "2"}
	c := plugins.AcquireCtx(r, route, time.Now().UnixNano()-5e6)
	defer plugins.ReleaseCtx(c)
	c.UpstreamNanos = 3e6
	c.AnsweredNanos = c.StartNanos + 4e6 // as the worker sets it for a proxied response
	c.Node = append(c.Node, "127.0.0.1:1980"...)
	d := NewDefault(Options{Version: "3.9.0"}, route)
	var s Scratch
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst = d.Append(dst[:0], c, &s)
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

// appendInt writes what strconv.AppendInt writes, at every count of digits and its edges.
func TestAppendInt(t *testing.T) {
	values := []int64{0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, 100000, 1733472000123,
		math.MaxInt64, math.MinInt64, -1, -10, -12345}
	for p := int64(1); p <= 1e18; p *= 10 {
		values = append(values, p-1, p, p+1, -p)
	}
	for _, v := range values {
		if got, want := appendInt([]byte("x"), v), strconv.AppendInt([]byte("x"), v, 10); string(got) != string(want) {
			t.Errorf("appendInt(%d) = %s, want %s", v, got, want)
		}
	}
}

// start_time is strconv's Unix milliseconds, across seconds and back, and below one.
func TestAppendStartTime(t *testing.T) {
	var s Scratch
	for _, ms := range []int64{1733472000123, 1733472000999, 1733472001000, 1733472001007, 1733472000050,
		0, 7, 999, 1000, 1001, 12345, 1733472001099} {
		if got, want := s.appendStartTime([]byte("x"), ms), strconv.AppendInt([]byte("x"), ms, 10); string(got) != string(want) {
			t.Errorf("appendStartTime(%d) = %s, want %s", ms, got, want)
		}
	}
}

func BenchmarkAppendInt(b *testing.B) {
	var dst []byte
	for b.Loop() {
		dst = appendInt(dst[:0], 1733472000123)
	}
}

// Header names are lowered and escaped as the byte-by-byte reference lowers and escapes
// them, at every length around a word and with a byte that needs more at every place.
func TestAppendLowerBody(t *testing.T) {
	for c := range utf8.RuneSelf {
		if !plainASCII[c] {
			continue
		}
		want := strings.Repeat(strings.ToLower(string(rune(c))), 8)
		var got [8]byte
		binary.LittleEndian.PutUint64(got[:], lower8(load64(strings.Repeat(string(rune(c)), 8))))
		if string(got[:]) != want {
			t.Errorf("lower8 of eight %q = %q", rune(c), got)
		}
	}
	for _, sp := range []string{"A", "Z", "@", "[", "a", "z", "`", "{", "-", "\"", "\\", "\x00", "\x7f", "\xff", "é", "\xe2\x82"} {
		for n := 1; n <= 20; n++ {
			for at := 0; at+len(sp) <= n; at++ {
				b := []byte(strings.Repeat("Xy", n)[:n])
				copy(b[at:], sp)
				lowered := []byte(string(b))
				for i, c := range lowered {
					if 'A' <= c && c <= 'Z' {
						lowered[i] = c + 'a' - 'A'
					}
				}
				want := string(appendStringByteByByte([]byte("p"), string(lowered)))
				got, _ := appendLowerBody([]byte(`p"`), b, nil)
				if string(got)+`"` != want {
					t.Errorf("appendLowerBody(%q) = %s, want %s", b, got, want)
				}
			}
		}
	}
}

func BenchmarkAppendMillis(b *testing.B) {
	var dst []byte
	for b.Loop() {
		dst = appendMillis(dst[:0], 5_123_456)
	}
}

// appendStringByteByByte is appendString as it was before the word-wide scan, the
// reference the fast path must match.
func appendStringByteByByte(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case plainASCII[c]:
				dst = append(dst, c)
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// Every byte that needs escaping, or starts a multi-byte sequence, at every place of an
// eight-byte word and across two, gives what the byte-by-byte scan gives.
func TestAppendStringWordScan(t *testing.T) {
	specials := []string{"\"", "\\", "\x00", "\x1f", "\x7f", "\n", "\x80", "\xff", "é", "€", "😀", "\xe2\x82", " ", "~"}
	for _, sp := range specials {
		for at := range 20 {
			for _, n := range []int{at + len(sp), at + len(sp) + 1, 24} {
				if n < at+len(sp) {
					continue
				}
				b := []byte(strings.Repeat("a", n))
				copy(b[at:], sp)
				s := string(b)
				want := string(appendStringByteByByte(nil, s))
				if got := string(appendString(nil, s)); got != want {
					t.Errorf("appendString(%q) = %s, want %s", s, got, want)
				}
				if got := string(appendString(nil, b)); got != want {
					t.Errorf("appendString([]byte(%q)) = %s, want %s", s, got, want)
				}
			}
		}
	}
	for c := range 256 {
		word := strings.Repeat(string([]byte{byte(c)}), 8)
		if got, want := plain8(word), c < utf8.RuneSelf && plainASCII[c]; got != want {
			t.Errorf("plain8 of eight %#x = %v, want %v", c, got, want)
		}
		for at := range 8 {
			b := []byte("abcdefgh")
			b[at] = byte(c)
			if got, want := plain8(b), c < utf8.RuneSelf && plainASCII[c]; got != want {
				t.Errorf("plain8(%q) = %v, want %v", b, got, want)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"plain", `q"b\`, "é€😀", "bad\xff\xfe utf8", "0123456789abcdef\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendString(nil, s)), string(appendStringByteByByte(nil, s)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// The ids written once for the logger's route are that route's only: a Ctx of another
// route (a global rule's instance) gets its own, and one without a route the host.
func TestDefaultIDs(t *testing.T) {
	d := NewDefault(Options{Version: "1.0"}, &plugins.RouteInfo{ID: "r", ServiceID: "s"})
	c := ctx()
	defer plugins.ReleaseCtx(c)
	var s Scratch
	for _, tc := range []struct {
		route              *plugins.RouteInfo
		routeID, serviceID any
		hasRouteID, hasIDs bool
	}{
		{&plugins.RouteInfo{ID: "r", ServiceID: "s"}, "r", "s", true, true},
		{&plugins.RouteInfo{ID: "r"}, "r", "", true, true},
		{&plugins.RouteInfo{ID: "other", ServiceID: "s"}, "other", "s", true, true},
		{nil, nil, "gw.test", false, true},
	} {
		c.Route = tc.route
		var e map[string]any
		out := d.Append(nil, c, &s)
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		_, has := e["route_id"]
		if has != tc.hasRouteID || e["route_id"] != tc.routeID || e["service_id"] != tc.serviceID {
			t.Errorf("route %+v: route_id %v, service_id %v, want %v, %v", tc.route, e["route_id"], e["service_id"], tc.routeID, tc.serviceID)
		}
		if srv, _ := json.Marshal(e["server"]); string(srv) != `{"hostname":`+string(appendString(nil, hostname))+`,"version":"1.0"}` {
			t.Errorf("server = %s", srv)
		}
	}
}

// Query arguments with an empty name or value, and headers and arguments whose names
// differ only in case (a header's are lower-cased, so they group; an argument's are not).
func TestPairsEdges(t *testing.T) {
	r := &fasthttp.RequestCtx{}
	r.Request.SetRequestURI("/p?=&a=&A=1&b&=x")
	r.Request.Header.DisableNormalizing()
	r.Request.Header.SetHost("h")
	r.Request.Header.Add("x-a", "1")
	r.Request.Header.Add("X-A", "2")
	c := plugins.AcquireCtx(r, nil, time.Now().UnixNano())
	defer plugins.ReleaseCtx(c)
	var s Scratch
	var e struct {
		Request struct {
			Headers     json.RawMessage `json:"headers"`
			Querystring json.RawMessage `json:"querystring"`
		} `json:"request"`
	}
	out := AppendDefault(nil, c, Options{}, &s)
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got := string(e.Request.Querystring); got != `{"":["","x"],"a":"","A":"1","b":true}` {
		t.Errorf("querystring = %s", got)
	}
	if got := string(e.Request.Headers); got != `{"host":"h","x-a":["1","2"]}` {
		t.Errorf("headers = %s", got)
	}
}
