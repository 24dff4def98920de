package plugins

import (
	"testing"

	"gw/internal/race"
)

func TestHeaderEdits(t *testing.T) {
	type edit struct{ op, name, value string }
	for _, tt := range []struct {
		name     string
		edits    []edit
		lines    string
		replaced []string // names whose client lines go
		kept     []string // names whose client lines stay
	}{
		{"none", nil, "", nil, []string{"traceparent", "X-A"}},
		{"set", []edit{{"set", "traceparent", "00-a"}}, "traceparent: 00-a\r\n",
			[]string{"traceparent", "TraceParent"}, []string{"tracestate", "trace", "traceparentx"}},
		{"set twice keeps the last", []edit{{"set", "X-A", "1"}, {"set", "x-a", "2"}}, "x-a: 2\r\n", []string{"X-A"}, nil},
		{"del", []edit{{"del", "tracestate", ""}}, "", []string{"tracestate"}, []string{"traceparent"}},
		{"del after set removes the set field", []edit{{"set", "X-A", "1"}, {"set", "X-B", "2"}, {"del", "x-a", ""}},
			"X-B: 2\r\n", []string{"X-A", "X-B"}, []string{"X-C"}},
		{"add keeps the client's", []edit{{"add", "X-A", "1"}, {"add", "X-A", "2"}}, "X-A: 1\r\nX-A: 2\r\n", nil, []string{"X-A"}},
		{"set after add replaces both", []edit{{"add", "X-A", "1"}, {"add", "X-B", "b"}, {"set", "X-A", "3"}},
			"X-B: b\r\nX-A: 3\r\n", []string{"X-A"}, []string{"X-B"}},
		{"add after set follows it", []edit{{"set", "X-A", "1"}, {"add", "X-A", "2"}}, "X-A: 1\r\nX-A: 2\r\n", []string{"X-A"}, nil},
		{"opentelemetry's", []edit{{"del", "tracestate", ""}, {"set", "traceparent", "00-b"}}, "traceparent: 00-b\r\n",
			[]string{"tracestate", "traceparent"}, []string{"User-Agent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var e HeaderEdits
			for round := range 2 { // the second after reset, on grown buffers
				for _, ed := range tt.edits {
					switch ed.op {
					case "set":
						e.set([]byte(ed.name), []byte(ed.value))
					case "add":
						e.add([]byte(ed.name), []byte(ed.value))
					case "del":
						e.del([]byte(ed.name))
					}
				}
				if got := string(e.Lines()); got != tt.lines {
					t.Errorf("round %d: lines %q, want %q", round, got, tt.lines)
				}
				for _, name := range tt.replaced {
					if !e.Replaces([]byte(name)) {
						t.Errorf("round %d: the client's %s is sent, want replaced", round, name)
					}
				}
				for _, name := range tt.kept {
					if e.Replaces([]byte(name)) {
						t.Errorf("round %d: the client's %s is replaced, want sent", round, name)
					}
				}
				if e.Empty() != (len(tt.edits) == 0) {
					t.Errorf("round %d: Empty() = %v with %d edits", round, e.Empty(), len(tt.edits))
				}
				e.reset()
			}
		})
	}
}

// A name or value that would break the recorded lines makes the edits touch every name,
// so the proxy sends the request the usual way; nothing later reads the lines as lines.
func TestHeaderEditsUnframed(t *testing.T) {
	for _, bad := range [][2]string{{"X-A", "1\r\nX-Injected: 2"}, {"X-A", "1\n"}, {"X:A", "1"}} {
		var e HeaderEdits
		e.set([]byte(bad[0]), []byte(bad[1]))
		e.del([]byte("X-B")) // must not parse the broken lines
		if !e.Touches(func([]byte) bool { return false }) {
			t.Errorf("edits with %q: %q do not send the request the usual way", bad[0], bad[1])
		}
		e.reset()
		e.set([]byte("X-A"), []byte("1"))
		if e.Touches(func([]byte) bool { return false }) {
			t.Errorf("after reset, a plain edit still counts as unframed")
		}
	}
}

func TestHeaderEditsDoNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts are the race detector's under -race")
	}
	var e HeaderEdits
	name, value, state := []byte("traceparent"), []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), []byte("tracestate")
	run := func() {
		e.del(state)
		e.set(name, value)
		if !e.Replaces(name) || len(e.Lines()) == 0 {
			t.Fatal("edits lost")
		}
		e.reset()
	}
	run()
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
		t.Errorf("recording opentelemetry's edits allocates %.1f times, want 0", allocs)
	}
}
