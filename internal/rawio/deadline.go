package rawio

import (
	"time"

	"gw/internal/monotime"
)

// maxSlack bounds LazyDeadline's slack: nginx's NGX_TIMER_LAZY_DELAY.
const maxSlack = int64(300 * time.Millisecond)

// LazyDeadline is one direction's armed deadline, moved only when a new one is further from
// it than the slack, as nginx moves its timers: under load every wait wants a deadline a
// few microseconds past the last one, and each move is a timer update under a lock. The
// slack is a sixteenth of the timeout, at most 300 ms, so a wait ends within 1/16 of its
// timeout of when it should. Deadlines are monotime stamps (0: none); monotime.Time makes
// one a time.Time for SetReadDeadline.
type LazyDeadline struct {
	armed int64 // 0: none armed
	slack int64
	// unknown is set when someone else set the deadline: the next Due arms what it gets.
	unknown bool
}

// Due reports whether want must be armed now in place of the armed deadline, and if so
// records it as armed; timeout is the wait want was computed for (want = now + timeout).
// force arms want whatever was armed before.
func (d *LazyDeadline) Due(want int64, timeout time.Duration, force bool) bool {
	force = force || d.unknown
	if !force && d.armed != 0 && want != 0 {
		if diff := want - d.armed; diff < d.slack && diff > -d.slack {
			return false
		}
	}
	if !force && d.armed == 0 && want == 0 {
		return false
	}
	*d = LazyDeadline{armed: want, slack: min(maxSlack, int64(timeout)/16)}
	return true
}

// After is Due for a wait that may last timeout from now: it returns the deadline to arm
// and true when the armed one must move. now is a monotime stamp the caller read lately,
// or 0 to read the clock here, which After does only for a timeout (0 means none, which
// disarms).
func (d *LazyDeadline) After(now int64, timeout time.Duration, force bool) (int64, bool) {
	var want int64
	if timeout > 0 {
		if now == 0 {
			now = monotime.Now()
		}
		want = now + int64(timeout)
	}
	return want, d.Due(want, timeout, force)
}

// Forget records that someone else set the deadline: the next Due arms whatever it is given.
func (d *LazyDeadline) Forget() { *d = LazyDeadline{unknown: true} }
