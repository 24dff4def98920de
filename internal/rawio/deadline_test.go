package rawio

import (
	"testing"
	"time"
)

func TestLazyDeadline(t *testing.T) {
	base := time.Unix(1000, 0)
	var d LazyDeadline
	steps := []struct {
		name    string
		want    time.Time
		timeout time.Duration
		force   bool
		due     bool
	}{
		{"nothing armed, none wanted", time.Time{}, 0, false, false},
		{"first deadline", base, 60 * time.Second, false, true},
		{"a few ms later: within the slack (300 ms)", base.Add(5 * time.Millisecond), 60 * time.Second, false, false},
		{"earlier within the slack", base.Add(-299 * time.Millisecond), 60 * time.Second, false, false},
		{"past the slack", base.Add(300 * time.Millisecond), 60 * time.Second, false, true},
		{"forced, though within the slack", base.Add(301 * time.Millisecond), 60 * time.Second, true, true},
		{"a short timeout's slack is a sixteenth", base.Add(2 * time.Second), time.Second, false, true},
		{"within 1/16 s", base.Add(2*time.Second + 60*time.Millisecond), time.Second, false, false},
		{"past 1/16 s", base.Add(2*time.Second + 70*time.Millisecond), time.Second, false, true},
		{"disarm", time.Time{}, 0, false, true},
		{"still none", time.Time{}, 0, false, false},
	}
	for _, s := range steps {
		if got := d.Due(s.want, s.timeout, s.force); got != s.due {
			t.Fatalf("%s: Due = %v, want %v", s.name, got, s.due)
		}
	}
	d.Forget()
	if !d.Due(time.Time{}, 0, false) {
		t.Fatal("after Forget, Due must arm whatever it gets (the deadline is someone else's)")
	}
	if _, due := d.After(0, false); due {
		t.Fatal("After(0) with none armed moved the deadline")
	}
	want, due := d.After(time.Minute, false)
	if !due || time.Until(want) < 59*time.Second {
		t.Fatalf("After(1m) = %v, %v; want a deadline a minute ahead", want, due)
	}
	if _, due := d.After(time.Minute, false); due {
		t.Fatal("a second After(1m) at once moved the deadline")
	}
}
