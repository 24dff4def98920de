package monotime

import (
	"testing"
	"time"
)

func TestConversions(t *testing.T) {
	before := time.Now()
	stamp := Now()
	after := time.Now()
	if stamp <= 0 {
		t.Fatalf("Now = %d, want > 0", stamp)
	}
	at := Time(stamp)
	if at.Before(before) || at.After(after) {
		t.Fatalf("Time(Now()) = %v, not between %v and %v", at, before, after)
	}
	if got := Of(at); got != stamp {
		t.Fatalf("Of(Time(%d)) = %d", stamp, got)
	}
	// A deadline from a stamp is measured on the monotonic clock, as time.Now's are.
	if d := time.Until(Time(stamp + int64(time.Hour))); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("time.Until an hour past the stamp = %v", d)
	}
	if u := Unix(stamp); u < before.UnixNano()-int64(time.Millisecond) || u > after.UnixNano()+int64(time.Millisecond) {
		t.Fatalf("Unix(Now()) = %d, not between %d and %d", u, before.UnixNano(), after.UnixNano())
	}
	if !Time(0).IsZero() || Of(time.Time{}) != 0 {
		t.Fatal("the zero stamp and the zero Time must map to each other")
	}
	if Of(before.Add(-time.Hour*24*365*50)) != 1 {
		t.Fatal("Of a time before the process started must be the earliest stamp, 1")
	}
}

// Resync follows a step of the wall clock, and leaves a drift under a millisecond alone.
func TestResyncFollowsASteppedWallClock(t *testing.T) {
	saved := offset.Load()
	defer offset.Store(saved)
	offset.Store(saved - int64(time.Hour)) // as if the wall clock stepped an hour ahead
	Resync()
	if d := Unix(Now()) - time.Now().UnixNano(); d < -int64(time.Millisecond) || d > int64(time.Millisecond) {
		t.Fatalf("after Resync, Unix is %v from the wall clock", time.Duration(d))
	}
	before := offset.Load()
	offset.Store(before + int64(100*time.Microsecond))
	Resync()
	if offset.Load() != before+int64(100*time.Microsecond) {
		t.Fatal("Resync moved the offset for a drift under a millisecond")
	}
}
