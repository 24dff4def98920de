package opentelemetry

import (
	"bufio"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/plugins"
)

func TestParseTraceparent(t *testing.T) {
	const trace, span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	tests := []struct {
		name, value string
		ok          bool
		flags       byte
	}{
		{"sampled", "00-" + trace + "-" + span + "-01", true, 1},
		{"not sampled", "00-" + trace + "-" + span + "-00", true, 0},
		{"other flags kept", "00-" + trace + "-" + span + "-09", true, 9},
		{"future version", "01-" + trace + "-" + span + "-01", true, 1},
		{"future version with more", "cc-" + trace + "-" + span + "-01-what-the-future-holds", true, 1},
		{"version 00 with more", "00-" + trace + "-" + span + "-01-x", false, 0},
		{"future version glued", "01-" + trace + "-" + span + "-01x", false, 0},
		{"version ff", "ff-" + trace + "-" + span + "-01", false, 0},
		{"upper-case trace", "00-0AF7651916CD43DD8448EB211C80319C-" + span + "-01", false, 0},
		{"upper-case version", "0A-" + trace + "-" + span + "-01", false, 0},
		{"zero trace", "00-00000000000000000000000000000000-" + span + "-01", false, 0},
		{"zero span", "00-" + trace + "-0000000000000000-01", false, 0},
		{"short trace", "00-" + trace[1:] + "-" + span + "-01", false, 0},
		{"short", "00-" + trace + "-" + span + "-1", false, 0},
		{"bad flags", "00-" + trace + "-" + span + "-0g", false, 0},
		{"wrong separator", "00_" + trace + "-" + span + "-01", false, 0},
		{"spaces", " 00-" + trace + "-" + span + "-01", false, 0},
		{"empty", "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := ParseTraceparent([]byte(tt.value))
			if ok != tt.ok {
				t.Fatalf("ParseTraceparent(%q) ok = %v, want %v", tt.value, ok, tt.ok)
			}
			if !ok {
				if p != (Parent{}) {
					t.Fatalf("refused, yet returned %+v", p)
				}
				return
			}
			if hex.EncodeToString(p.TraceID[:]) != trace || hex.EncodeToString(p.SpanID[:]) != span || p.Flags != tt.flags {
				t.Fatalf("got %x %x %02x", p.TraceID, p.SpanID, p.Flags)
			}
		})
	}
}

func FuzzParseTraceparent(f *testing.F) {
	for _, s := range []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-x", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		p, ok := ParseTraceparent(v)
		if !ok {
			return
		}
		// What it accepts, written back as version 00, reads back the same.
		tc := plugins.TraceContext{TraceID: p.TraceID, SpanID: p.SpanID, Sampled: p.Sampled()}
		again, ok := ParseTraceparent(appendTraceparent(nil, &tc))
		if !ok || again.TraceID != p.TraceID || again.SpanID != p.SpanID || again.Sampled() != p.Sampled() {
			t.Fatalf("%q parses to %+v, which does not round-trip: %+v %v", v, p, again, ok)
		}
		if string(v[3:35]) != hex.EncodeToString(p.TraceID[:]) {
			t.Fatalf("%q: trace id %x", v, p.TraceID)
		}
	})
}

func TestTraceIDFromRequestID(t *testing.T) {
	for v, want := range map[string]string{
		"0af7651916cd43dd8448eb211c80319c":     "0af7651916cd43dd8448eb211c80319c",
		"0AF7651916CD43DD8448EB211C80319C":     "0af7651916cd43dd8448eb211c80319c",
		"0af76519-16cd-43dd-8448-eb211c80319c": "0af7651916cd43dd8448eb211c80319c",
		"0af76519-16cd-43dd-8448eb211c80319c-": "",
		"00000000000000000000000000000000":     "",
		"123":                                  "",
		"0af7651916cd43dd8448eb211c80319g":     "",
	} {
		id, ok := traceIDFromRequestID([]byte(v))
		if got := hex.EncodeToString(id[:]); ok != (want != "") || ok && got != want {
			t.Errorf("traceIDFromRequestID(%q) = %s, %v; want %q", v, got, ok, want)
		}
	}
}

func TestSamplers(t *testing.T) {
	// opentelemetry-lua reads the first 4 bytes: low samples at any fraction above 0, high
	// at none below 1, whatever the other 12 bytes.
	low := [16]byte{3: 1, 8: 0xff, 15: 0xff}
	high := [16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff}
	// 0x80000000 is just above half of 0xffffffff, 0x7fffffff just below.
	aboveHalf, belowHalf := [16]byte{0: 0x80}, [16]byte{0: 0x7f, 1: 0xff, 2: 0xff, 3: 0xff}
	sampledParent, unsampledParent := Parent{Flags: 1}, Parent{}
	on, off := &Sampler{Kind: AlwaysOn}, &Sampler{Kind: AlwaysOff}
	half := &Sampler{Kind: TraceIDRatio, Fraction: 0.5}
	tests := []struct {
		name      string
		s         *Sampler
		trace     [16]byte
		parent    Parent
		hasParent bool
		want      bool
	}{
		{"always_on", on, high, unsampledParent, true, true},
		{"always_off", off, low, sampledParent, true, false},
		{"ratio low id", half, low, Parent{}, false, true},
		{"ratio high id", half, high, Parent{}, false, false},
		{"ratio ignores the parent", half, high, sampledParent, true, false},
		{"ratio just below half", half, belowHalf, Parent{}, false, true},
		{"ratio just above half", half, aboveHalf, Parent{}, false, false},
		{"ratio 0", &Sampler{Kind: TraceIDRatio}, low, Parent{}, false, false},
		{"ratio 1", &Sampler{Kind: TraceIDRatio, Fraction: 1}, high, Parent{}, false, true},
		{"parent_base sampled parent", &Sampler{Kind: ParentBase}, high, sampledParent, true, true},
		{"parent_base unsampled parent, root on", &Sampler{Kind: ParentBase, Root: on}, low, unsampledParent, true, false},
		{"parent_base no parent, no root", &Sampler{Kind: ParentBase}, low, Parent{}, false, false},
		{"parent_base no parent, root on", &Sampler{Kind: ParentBase, Root: on}, high, Parent{}, false, true},
		{"parent_base no parent, root ratio", &Sampler{Kind: ParentBase, Root: half}, high, Parent{}, false, false},
	}
	for _, tt := range tests {
		if got := tt.s.sample(tt.trace, tt.parent, tt.hasParent); got != tt.want {
			t.Errorf("%s: sample = %v, want %v", tt.name, got, tt.want)
		}
	}
	// A fraction samples about that share of random traces.
	n, sampled := 20000, 0
	quarter := &Sampler{Kind: TraceIDRatio, Fraction: 0.25}
	for range n {
		if quarter.sample(newTraceID(), Parent{}, false) {
			sampled++
		}
	}
	if share := float64(sampled) / float64(n); share < 0.22 || share > 0.28 {
		t.Errorf("trace_id_ratio 0.25 sampled %.3f of random traces", share)
	}
}

func BenchmarkParseTraceparent(b *testing.B) {
	v := []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	for b.Loop() {
		if _, ok := ParseTraceparent(v); !ok {
			b.Fatal("refused")
		}
	}
}

// TestAccessReplacesEveryTraceparent: whatever trace headers the client sent (none, a
// valid one, an invalid or empty one, several), the upstream request carries exactly one
// traceparent, the span's, both in the parsed header and in the edits a pristine forward
// applies; tracestate stays only behind a valid traceparent.
func TestAccessReplacesEveryTraceparent(t *testing.T) {
	const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tt := range []struct {
		name, headers string
		keepState     bool
	}{
		{"none", "", false},
		{"valid", "traceparent: " + valid + "\r\ntracestate: v=1\r\n", true},
		{"invalid", "TraceParent: nope\r\ntracestate: v=1\r\n", false},
		{"empty", "traceparent:\r\n", false},
		{"several", "traceparent: " + valid + "\r\ntraceparent: 00-x\r\n", false},
		{"state alone", "tracestate: v=1\r\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			raw := "GET / HTTP/1.1\r\nHost: a\r\n" + tt.headers + "\r\n"
			if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatal(err)
			}
			cfg, _ := Parse([]byte(`{"sampler":{"name":"always_on"}}`))
			h := &handler{cfg: cfg, exp: newExporter(testAttr("127.0.0.1:1"), localCounters(), nil)}
			c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 1)
			defer plugins.ReleaseCtx(c)
			if err := h.Access(c); err != nil {
				t.Fatal(err)
			}
			var want [traceparentLen]byte
			sent := appendTraceparent(want[:0], &c.Trace)
			all := ctx.Request.Header.PeekAll("traceparent")
			if len(all) != 1 || string(all[0]) != string(sent) {
				t.Errorf("parsed header's traceparents %q, want just %s", all, sent)
			}
			e := c.HeaderEdits()
			if string(e.Lines()) != "traceparent: "+string(sent)+"\r\n" {
				t.Errorf("edits' lines %q", e.Lines())
			}
			if sentByClient := strings.Contains(strings.ToLower(tt.headers), "traceparent"); e.Replaces([]byte("traceparent")) != sentByClient {
				t.Errorf("edits replace the client's traceparent: %v, want %v", !sentByClient, sentByClient)
			}
			state := ctx.Request.Header.Peek("tracestate")
			if keeps := state != nil && !e.Replaces([]byte("tracestate")); keeps != tt.keepState {
				t.Errorf("tracestate kept: %v (%q), want %v", keeps, state, tt.keepState)
			}
		})
	}
}

// BenchmarkNewIDs is a new trace's ids and its traceparent, as Access makes them for a
// request without one.
func BenchmarkNewIDs(b *testing.B) {
	var tc plugins.TraceContext
	var buf [traceparentLen]byte
	b.ReportAllocs()
	for b.Loop() {
		tc.TraceID, tc.SpanID = newTraceID(), newSpanID()
		appendTraceparent(buf[:0], &tc)
	}
}
