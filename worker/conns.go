package worker

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// idleGrace is how long a draining worker leaves an idle keep-alive connection open before
// closing it. A client may be about to send its next request on it; closing sooner (as
// fasthttp's Shutdown does, every 100 ms) races that request. Requests that do arrive are
// answered with Connection: close, so busy clients leave on their own.
const idleGrace = 1500 * time.Millisecond

// connTracker knows every open client connection and since when it has been idle, so a
// draining worker can close exactly the ones that have been quiet long enough.
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]int64 // idle since (unix nanos); 0 while a request is in progress
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

func newConnTracker() *connTracker { return &connTracker{conns: map[net.Conn]int64{}} }

// hook is the fasthttp Server's ConnState callback. Map assignments to existing keys do
// not allocate, so the per-request cost is two uncontended lock/lookup pairs.
func (t *connTracker) hook(c net.Conn, state fasthttp.ConnState) {
	switch state {
	case fasthttp.StateNew:
		t.mu.Lock()
		t.conns[c] = time.Now().UnixNano()
		t.mu.Unlock()
	case fasthttp.StateActive:
		t.mu.Lock()
		if _, ok := t.conns[c]; ok {
			t.conns[c] = 0
		}
		t.mu.Unlock()
	case fasthttp.StateIdle:
		t.mu.Lock()
		if _, ok := t.conns[c]; ok {
			t.conns[c] = time.Now().UnixNano()
		}
		t.mu.Unlock()
	case fasthttp.StateHijacked, fasthttp.StateClosed:
		t.mu.Lock()
		if _, ok := t.conns[c]; ok {
			delete(t.conns, c)
			t.open.Add(-1)
		}
		t.mu.Unlock()
	}
}

// closeIdle closes connections idle for at least grace and returns how many remain open,
// counting those accepted but not yet picked up.
func (t *connTracker) closeIdle(grace time.Duration) int {
	cutoff := time.Now().Add(-grace).UnixNano()
	t.mu.Lock()
	var quiet []net.Conn
	for c, idleSince := range t.conns {
		if idleSince != 0 && idleSince <= cutoff {
			quiet = append(quiet, c)
		}
	}
	t.mu.Unlock()
	remaining := int(t.open.Load())
	for _, c := range quiet {
		// fasthttp's goroutine for c sees the error on its next read and reports
		// StateClosed, which removes it from the map.
		_ = c.Close()
	}
	return remaining
}
