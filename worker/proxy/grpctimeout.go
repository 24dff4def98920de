package proxy

import (
	"math"
	"time"

	"gw/internal/monotime"
)

// A gRPC call's upstream timeouts are nginx's grpc_read_timeout and grpc_send_timeout,
// which APISIX sets from the upstream's (or route's) timeout.read and timeout.send, per
// call rather than per connection, since calls share a connection here:
//
//   - read: the node sent nothing on the call (no HEADERS, DATA or trailers) for
//     timeout.read while gw waited for it: from the request's end (END_STREAM) or the
//     response's header, whichever comes first, until the response ends. As nginx's, it
//     does not run while the client is still streaming its request and the node has not
//     answered (a client-streaming call answers at the end), nor while the call's receive
//     window is shut (the client is slow to read: the node may not send; the client's
//     side has its own send_timeout), and it starts over at each frame from the node and
//     each window gw gives back;
//   - send: a write of the request body waited for the node's flow-control windows for
//     timeout.send, or a write to the connection's socket (the node reads nothing at
//     all) was blocked that long; the latter closes the connection, as it is wedged for
//     every call on it.
//
// Either stops the call as a cancellation does: the node's stream is reset
// (RST_STREAM CANCEL) and the caller learns why from TimedOut.
//
// One timer per call watches the grpc-timeout deadline and both timeouts: it is the
// pooled call's own (no allocation per call), and fires at most once per timeout's
// length while the call lasts, rechecking the stamps the connection keeps under its mu
// (readSince, sendWaitSince) rather than being reset at every frame. It is not stopped
// when the call is released, and the next acquisition of the call resets it only when
// it must fire earlier than it will: with 60 s timeouts and calls shorter than that, a
// call's timer is reset about once a minute rather than at each call, and no lock is
// taken on the way (arm).

// watchIO starts watching the node's side of the call with timeout.send and
// timeout.read (0 for none), from now (monotime).
func (c *GRPCCall) watchIO(send, read time.Duration, now int64) {
	// Stored only when they change: a pooled call serves one upstream's calls most often,
	// and a store costs a fence where a load costs nothing.
	if c.sendTimeout.Load() != int64(send) {
		c.sendTimeout.Store(int64(send))
	}
	if c.readTimeout.Load() != int64(read) {
		c.readTimeout.Store(int64(read))
	}
	if poll := ioPollPeriod(int64(send), int64(read)); poll > 0 {
		c.arm(now + poll)
	}
}

// ioPollPeriod is how often the timer looks at a call whose timeouts are not running:
// the shorter timeout, so that one that starts running between two looks is caught in
// time (it is due a whole timeout after it started).
func ioPollPeriod(send, read int64) int64 {
	switch {
	case send <= 0:
		return max(read, 0)
	case read <= 0:
		return send
	}
	return min(send, read)
}

// arm makes the timer fire at at, unless it fires earlier already: the firing looks
// again. The test without timerMu is what keeps a call's timer off its path in the
// steady state; it is sound because what arms (AcquireGRPCCall, watchIO) stores the
// acquisition's state and timeouts before it loads armedAt here, and fire stores 0 in
// armedAt before it loads them: an arming that finds the timer armed, and skips, comes
// before that firing has looked, which then sees the acquisition.
func (c *GRPCCall) arm(at int64) {
	if a := c.armedAt.Load(); a != 0 && a <= at {
		return
	}
	c.timerMu.Lock()
	c.armLocked(at)
	c.timerMu.Unlock()
}

// armLocked is arm under timerMu.
func (c *GRPCCall) armLocked(at int64) {
	if a := c.armedAt.Load(); a != 0 && a <= at {
		return
	}
	c.armedAt.Store(at)
	d := time.Duration(at - monotime.Now())
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.fire)
	} else {
		c.timer.Reset(d)
	}
}

// fire is the timer's: it stops the call whose deadline or timeout passed, and arms the
// timer again for the next thing due otherwise. It looks at the acquisition of the call
// current when it runs, whichever armed it.
func (c *GRPCCall) fire() {
	c.timerMu.Lock()
	c.armedAt.Store(0) // before the state is loaded: see arm
	s := c.state.Load()
	if s&grpcStopMask != 0 {
		c.timerMu.Unlock()
		return // pooled (the next acquisition arms it again), or stopped
	}
	now := monotime.Now()
	why, next, wedged := c.dueLocked(now)
	if why != 0 {
		c.timerMu.Unlock()
		if c.state.CompareAndSwap(s, s|why) {
			if wedged != nil {
				// The socket's write is blocked with the connection's mu held: closing
				// the socket ends it, and the connection with it.
				_ = wedged.nc.Close()
			}
			c.wake()
		}
		return
	}
	if next != math.MaxInt64 {
		c.armLocked(next)
	}
	c.timerMu.Unlock()
}

// dueLocked is why the call must stop now (0 for none) and otherwise when to look
// again, math.MaxInt64 for never (under timerMu); wedged is the connection whose socket
// write has been blocked for timeout.send, to be closed.
func (c *GRPCCall) dueLocked(now int64) (why uint64, next int64, wedged *grpcConn) {
	deadline := c.deadlineAt.Load()
	if now >= deadline {
		return grpcStopDeadline, 0, nil
	}
	next = deadline
	send, read := c.sendTimeout.Load(), c.readTimeout.Load()
	poll := ioPollPeriod(send, read)
	if poll == 0 {
		return 0, next, nil
	}
	next = min(next, now+poll)
	cn := c.conn.Load()
	if cn == nil {
		return 0, next, nil // dialling (timeout.connect bounds it) or between tries
	}
	if ws := cn.writingSince.Load(); send > 0 && ws != 0 && now-ws >= send {
		return grpcStopSendTimeout, 0, cn
	}
	// Not Lock: the mu may be held by a write to a socket that is blocked, which the
	// check above catches on a later look.
	if !cn.mu.TryLock() {
		return 0, min(next, now+int64(time.Millisecond)), nil
	}
	defer cn.mu.Unlock()
	if c.conn.Load() != cn {
		return 0, next, nil // taken off the connection meanwhile
	}
	if read > 0 && c.readRunningLocked() {
		due := c.readSince + read
		if now >= due {
			return grpcStopReadTimeout, 0, nil
		}
		next = min(next, due)
	}
	if send > 0 && c.sendWaitSince != 0 {
		due := c.sendWaitSince + send
		if now >= due {
			return grpcStopSendTimeout, 0, nil
		}
		next = min(next, due)
	}
	return 0, next, nil
}

// readRunningLocked reports whether the read timeout runs: gw waits for the node, which
// may send (under the connection's mu).
func (c *GRPCCall) readRunningLocked() bool {
	return !c.remoteDone && c.err == nil && (c.localDone || c.gotHeaders) && c.recvWindow > 0
}

// TimedOut is why the node's side of the call timed out, for the client's gRPC status
// message: "" when it did not (the call may have stopped otherwise, Stopped).
func (c *GRPCCall) TimedOut() string {
	switch c.state.Load() & grpcStopMask {
	case grpcStopReadTimeout:
		return "upstream sent nothing for " + formatSeconds(time.Duration(c.readTimeout.Load()).Seconds()) + " (timeout.read)"
	case grpcStopSendTimeout:
		return "upstream took none of the request for " + formatSeconds(time.Duration(c.sendTimeout.Load()).Seconds()) + " (timeout.send)"
	}
	return ""
}
