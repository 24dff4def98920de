package worker

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/monotime"
	"gw/plugins"
)

// idleGrace is how long a draining worker leaves an idle keep-alive connection open before
// closing it. A client may be about to send its next request on it; closing sooner (as
// fasthttp's Shutdown does, every 100 ms) races that request. Requests that do arrive are
// answered with Connection: close, so busy clients leave on their own.
const idleGrace = 1500 * time.Millisecond

// connMark is what the worker tracks of one client connection, kept in the connection (an
// edgeConn) so that a request's two state changes cost no lookup and no lock.
type connMark struct {
	// idleSince is when the connection went idle (monotime); 0 while a request is in
	// progress. The drain reads it from another goroutine.
	idleSince atomic.Int64
	// state is the connection's last state as the plugins' observers heard it; only the
	// connection's own goroutine touches it.
	state plugins.ConnState
	// tracked is set while the connection is in the tracker's set, so that StateClosed
	// after StateHijacked (or the reverse) removes it once.
	tracked bool
	// at is the connection's index in the tracker's set while tracked. It fits in the
	// padding after state and tracked, so the edgeConn keeps its 896-byte size class.
	at int32
}

// connTracker knows every open client connection and since when it has been idle, so a
// draining worker can close exactly the ones that have been quiet long enough. The set
// changes when a connection opens or closes, not per request.
//
// The set is two parallel slices, each mark knowing its index (connMark.at), so adding and
// removing a connection is an append and a swap with the last: a map cost each new
// connection a hash, an insert and a delete (runtime.mapassign and maps.(*table).Delete,
// 0.7% of the worker's CPU under ab -c 1000 without keep-alive).
type connTracker struct {
	mu sync.Mutex
	// conns holds each open connection and marks its mark, at the same index: the
	// edgeConn's own, or for a connection that is not an edgeConn one allocated here.
	conns []net.Conn
	marks []*connMark
	// others finds the mark of a connection that is not an edgeConn (a listener that is
	// not TCP, in tests), which has nowhere to keep its own.
	others map[net.Conn]*connMark
	// open counts from accept to close. fasthttp reports StateNew only once a pool
	// goroutine picks the connection up, so counting at accept closes the window in which a
	// draining worker would see no connection and exit with one just accepted.
	open atomic.Int64
}

// countingListener counts every accepted connection into the tracker.
type countingListener struct {
	net.Listener
	t *connTracker
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.t.open.Add(1)
	}
	return c, err
}

func newConnTracker() *connTracker { return &connTracker{others: map[net.Conn]*connMark{}} }

// add puts c, whose mark is m, in the set; under t.mu.
func (t *connTracker) add(c net.Conn, m *connMark) {
	m.at, m.tracked = int32(len(t.conns)), true
	t.conns = append(t.conns, c)
	t.marks = append(t.marks, m)
	if edgeConnOf(c) == nil {
		t.others[c] = m
	}
}

// remove takes c, whose mark is m, out of the set, moving the last connection into its
// place; under t.mu.
func (t *connTracker) remove(c net.Conn, m *connMark) {
	last := len(t.conns) - 1
	if i := int(m.at); i != last {
		t.conns[i], t.marks[i] = t.conns[last], t.marks[last]
		t.marks[i].at = int32(i)
	}
	t.conns[last], t.marks[last] = nil, nil // no longer held by the backing arrays
	t.conns, t.marks = t.conns[:last], t.marks[:last]
	m.tracked = false
	delete(t.others, c) // nothing for an edgeConn
}

// markOf finds c's mark: in its edgeConn ec when it has one (which also learns of the
// state change), else in the tracker's set.
func (t *connTracker) markOf(c net.Conn, ec *edgeConn, state fasthttp.ConnState, now int64) *connMark {
	if ec != nil {
		ec.stateChanged(state, now)
		return &ec.mark
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.others[c]
	if m == nil && state == fasthttp.StateNew {
		m = new(connMark)
	}
	return m
}

// hook is the fasthttp Server's ConnState callback, for the drain and the plugins'
// connection observers.
func (t *connTracker) hook(c net.Conn, state fasthttp.ConnState, observers []plugins.ConnObserver) {
	// The one clock reading of a change, which the connection's next wait also takes for
	// now. Going idle, it is when the answer was ready if nothing waited since (answeredAt).
	ec := edgeConnOf(c)
	var now int64
	if state == fasthttp.StateIdle && ec != nil {
		now, ec.answeredAt = ec.answeredAt, 0
	}
	if now == 0 && (state == fasthttp.StateNew || state == fasthttp.StateIdle) {
		now = monotime.Now()
	}
	m := t.markOf(c, ec, state, now)
	if m == nil {
		return // a state change after the connection left the set
	}
	switch state {
	case fasthttp.StateNew:
		m.idleSince.Store(now)
		t.mu.Lock()
		if !m.tracked { // StateNew comes once per connection; never index a mark twice
			t.add(c, m)
		}
		t.mu.Unlock()
	case fasthttp.StateActive:
		m.idleSince.Store(0)
	case fasthttp.StateIdle:
		m.idleSince.Store(now)
	case fasthttp.StateHijacked, fasthttp.StateClosed:
		t.mu.Lock()
		if m.tracked {
			t.remove(c, m)
			t.open.Add(-1)
		}
		t.mu.Unlock()
	}
	if len(observers) > 0 && m.state != plugins.ConnClosed {
		to := connStateOf(state)
		for _, o := range observers {
			o.ConnChanged(m.state, to)
		}
		m.state = to
	}
}

// connStateOf maps fasthttp's connection states onto the plugins': a hijacked connection
// (a websocket tunnel) is no longer served, so closed as far as they know.
func connStateOf(s fasthttp.ConnState) plugins.ConnState {
	switch s {
	case fasthttp.StateNew:
		return plugins.ConnNew
	case fasthttp.StateActive:
		return plugins.ConnActive
	case fasthttp.StateIdle:
		return plugins.ConnIdle
	}
	return plugins.ConnClosed
}

// closeIdle closes connections idle for at least grace and returns how many remain open,
// counting those accepted but not yet picked up.
func (t *connTracker) closeIdle(grace time.Duration) int {
	cutoff := monotime.Now() - int64(grace)
	t.mu.Lock()
	var quiet []net.Conn
	for i, m := range t.marks {
		if idleSince := m.idleSince.Load(); idleSince != 0 && idleSince <= cutoff {
			quiet = append(quiet, t.conns[i])
		}
	}
	t.mu.Unlock()
	remaining := int(t.open.Load())
	for _, c := range quiet {
		// fasthttp's goroutine for c sees the error on its next read and reports
		// StateClosed, which removes it from the set.
		_ = c.Close()
	}
	return remaining
}

// edgeConnOf finds the edgeConn under a client connection, TLS or not; nil for a
// connection that did not come through an edgeListener.
func edgeConnOf(c net.Conn) *edgeConn {
	switch c := c.(type) {
	case *edgeConn:
		return c
	case *tls.Conn:
		ec, _ := c.NetConn().(*edgeConn)
		return ec
	case *tlsStreamConn:
		return c.edgeConn // an HTTP/2 stream's own (http2.go)
	}
	return nil
}
