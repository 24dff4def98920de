package rawio

import (
	"testing"
	"time"

	"gw/internal/monotime"
)

func TestLazyDeadline(t *testing.T) {
	base := int64(1000 * time.Second)
	at := func(d time.Duration) int64 { return base + int64(d) }
	var d LazyDeadline
	steps := []struct {
		name    string
		want    int64
		timeout time.Duration
		force   bool
		due     bool
	}{
		{"nothing armed, none wanted", 0, 0, false, false},
		{"first deadline", at(0), 60 * time.Second, false, true},
		{"a few ms later: within the slack (300 ms)", at(5 * time.Millisecond), 60 * time.Second, false, false},
		{"earlier within the slack", at(-299 * time.Millisecond), 60 * time.Second, false, false},
		{"past the slack", at(300 * time.Millisecond), 60 * time.Second, false, true},
		{"forced, though within the slack", at(301 * time.Millisecond), 60 * time.Second, true, true},
		{"a short timeout's slack is a sixteenth", at(2 * time.Second), time.Second, false, true},
		{"within 1/16 s", at(2*time.Second + 60*time.Millisecond), time.Second, false, false},
		{"past 1/16 s", at(2*time.Second + 70*time.Millisecond), time.Second, false, true},
		{"disarm", 0, 0, false, true},
		{"still none", 0, 0, false, false},
	}
	for _, s := range steps {
		if got := d.Due(s.want, s.timeout, s.force); got != s.due {
			t.Fatalf("%s: Due = %v, want %v", s.name, got, s.due)
		}
	}
	d.Forget()
	if !d.Due(0, 0, false) {
		t.Fatal("after Forget, Due must arm whatever it gets (the deadline is someone else's)")
	}
	if _, due := d.After(0, 0, false); due {
		t.Fatal("After with no timeout and none armed moved the deadline")
	}
	want, due := d.After(0, time.Minute, false)
	if !due || time.Until(monotime.Time(want)) < 59*time.Second {
		t.Fatalf("After(now, 1m) = %v, %v; want a deadline a minute ahead", want, due)
	}
	if _, due := d.After(0, time.Minute, false); due {
		t.Fatal("a second After(now, 1m) at once moved the deadline")
	}
	// A stamp the caller read stands for now: no clock read, the deadline from it.
	if got, due := d.After(want, time.Minute, false); !due || got != want+int64(time.Minute) {
		t.Fatalf("After(stamp, 1m) = %d, %v; want %d armed", got, due, want+int64(time.Minute))
	}
}
