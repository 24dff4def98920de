package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Owning the descriptor.
//
// Every call through syscall.RawConn goes through net's layers: the descriptor's lock
// (fdMutex), the poller's reset, a deferred unlock, two closures. Per proxied request a
// Stream makes four such calls, and under perf they cost 1.1 µs in a worker spending 37 µs
// a request. What the lock buys is that a Close from another goroutine cannot close the
// descriptor while a read is about to use its number, which the kernel may meanwhile have
// given to a new connection: that read would take another client's bytes.
//
// An owned Stream makes that promise itself, more cheaply: each call holds a reference
// (one atomic add on entry and one on exit), and Close, from any goroutine, marks the
// Stream closing, shuts the socket down so that a call parked on the poller wakes and
// ends, and leaves the close itself to whoever drops the last reference. So the
// descriptor is closed exactly once, never under a call, and a call never starts once
// closing is set. Everything else (the waits, the deadlines) is the runtime's poller, as
// before, reached as WaitBeforeReads reaches it.

// The Stream's state word: the closing and closed flags, and the references held, in units
// of stateRef.
const (
	stateClosing uint64 = 1 << iota
	stateClosed
	stateRef
)

// Own makes s read and write its descriptor with its own system calls and waits, and
// reports whether it could: it needs the runtime's poll descriptor (poll.go). Reads wait
// first only once WaitBeforeReads is on as well. Whether or not it could, close becomes
// what Close calls, once, and from then on every close of the connection must go through
// s.Close: a close behind s's back could free the descriptor under a call in progress.
// For a Socket's Stream close may be nil: Close then closes the Socket, and the caller need
// not allocate a method value to say so. Call it before another goroutine can see the
// connection.
func (s *Stream) Own(close func() error) bool {
	s.closeFn = close
	if r, ok := s.raw.(socketRaw); ok {
		// A Socket: no poll descriptor yet, and none until a call has to wait (waitDesc).
		s.sock, s.fd, s.owned = r.s, uintptr(r.s.fd), true
		return true
	}
	if s.pollDesc == 0 {
		s.pollDesc = pollDescOf(s.raw)
	}
	if s.pollDesc == 0 {
		return false
	}
	var fd uintptr
	if s.raw.Control(func(d uintptr) { fd = d }) != nil {
		return false
	}
	s.fd, s.owned = fd, true
	return true
}

// Close closes the connection, safely from any goroutine and any number of times: a call in
// progress ends (a read with io.EOF, a write with EPIPE) and the connection is closed as it
// does. Only the first Close reports an error, and only when it closed the connection
// itself. It closes what Own was given: on a Stream never handed to Own it only marks it
// closed.
func (s *Stream) Close() error {
	var was uint64
	for {
		was = s.state.Load()
		if was&stateClosing != 0 {
			return net.ErrClosed
		}
		if s.state.CompareAndSwap(was, was|stateClosing+stateRef) {
			break
		}
	}
	if was >= stateRef {
		// A call is in progress, perhaps parked on the poller: the reference taken above
		// keeps the descriptor open for the shutdown that wakes it.
		_ = s.raw.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	}
	return s.release()
}

// acquire takes a reference for a call, and fails once Close began.
func (s *Stream) acquire() bool {
	if s.state.Add(stateRef)&stateClosing != 0 {
		s.release()
		return false
	}
	return true
}

// release drops a reference; the last one after Close began closes the connection.
func (s *Stream) release() error {
	if s.state.Add(^(stateRef - 1)) != stateClosing { // Add(-stateRef)
		return nil
	}
	if !s.state.CompareAndSwap(stateClosing, stateClosing|stateClosed) {
		return nil // another release got there first
	}
	switch {
	case s.closeFn != nil:
		return s.closeFn()
	case s.sock != nil:
		return s.sock.Close()
	}
	return nil
}

// errOf is the error net reports for what runtimePollWait returned.
func errOf(pollCode int) error {
	switch pollCode {
	case pollNoError:
		return nil
	case pollErrTimeout:
		return os.ErrDeadlineExceeded
	case pollErrClosing:
		return net.ErrClosed
	}
	return os.NewSyscallError("epoll", syscall.EBADF) // pollErrNotPollable: cannot happen for a socket the poller has
}

// A wait of an owned Stream arms the deadline for it first, as a call through net's Read
// does when the socket is not ready. It needs no stale retry: the deadline it asks for lies
// a whole timeout past the wait's start, so an armed deadline that passed unnoticed always
// moves (LazyDeadline's slack is a sixteenth of the timeout).
//
// A Socket's Stream registers it first (waitDesc), before the deadline is armed: the
// deadline lives in the poll descriptor.
func (s *Stream) waitReadable() error {
	pd, err := s.waitDesc()
	if err != nil {
		return err
	}
	if s.waiter != nil {
		s.waiter.ArmRead(false)
	}
	return errOf(runtimePollWait(pd, 'r'))
}

func (s *Stream) waitWritable() error {
	pd, err := s.waitDesc()
	if err != nil {
		return err
	}
	if s.waiter != nil {
		s.waiter.ArmWrite(false)
	}
	return errOf(runtimePollWait(pd, 'w'))
}

// waitDesc is the poll descriptor an owned Stream waits on: a Socket's, registered now if
// no call waited before. It is read afresh each time (an atomic load) rather than kept in
// pollDesc, since a Stream's reader and writer may both be the first to wait.
func (s *Stream) waitDesc() (uintptr, error) {
	if s.sock == nil {
		return s.pollDesc, nil
	}
	return s.sock.register()
}

// readOwned is Read for an owned Stream.
func (s *Stream) readOwned(p []byte) (int, error) {
	if !s.acquire() {
		return 0, net.ErrClosed
	}
	n, err := s.readHeld(p)
	return n, s.end(err)
}

// end ends a call that acquire began, and returns its error, net.ErrClosed in place of
// one a Close caused (closedUnder).
func (s *Stream) end(err error) error {
	if err != nil {
		err = s.closedUnder(err)
	}
	s.release()
	return err
}

// closedUnder returns net.ErrClosed in place of err when a Close came during the call, as
// net.Conn does: the shutdown that woke the call is not the peer's doing.
func (s *Stream) closedUnder(err error) error {
	if s.state.Load()&stateClosing != 0 {
		return net.ErrClosed
	}
	return err
}

func (s *Stream) readHeld(p []byte) (int, error) {
	if s.waitsFirst() {
		if err := s.waitReadable(); err != nil {
			return 0, err
		}
	}
	for {
		s.reads++
		var n, left int
		var errno syscall.Errno
		if s.inq {
			n, left, errno = s.recv.read(s.fd, p)
		} else {
			// Nothing to learn from a control message: recv(2) is cheaper than recvmsg(2),
			// which copies its message header and vector in and out.
			n, errno = recv(s.fd, p)
			left = -1
		}
		switch errno {
		case 0:
			if n == 0 {
				return 0, io.EOF
			}
			s.drained = left == 0
			if s.drained {
				s.wrote = false
			}
			return n, nil
		case syscall.EAGAIN:
			// Woken for bytes an earlier read already took: the readiness is cleared now.
			if err := s.waitReadable(); err != nil {
				return 0, err
			}
		default:
			return 0, os.NewSyscallError("read", errno)
		}
	}
}

// writeOwned is Write for an owned Stream.
func (s *Stream) writeOwned(p []byte) (int, error) {
	if !s.acquire() {
		return 0, net.ErrClosed
	}
	n, err := s.writeHeld(p)
	return n, s.end(err)
}

func (s *Stream) writeHeld(p []byte) (int, error) {
	s.wbuf, s.wn, s.werrno = p, 0, 0
	var err error
	for err == nil {
		errno := s.writeSome(s.fd)
		if errno == 0 {
			break
		}
		if errno == syscall.EAGAIN {
			err = s.waitWritable()
		} else {
			err = os.NewSyscallError("write", errno)
		}
	}
	s.wbuf = nil
	if err == nil {
		s.wrote = true
	}
	return s.wn, err
}

// writeThenAwaitOwned is WriteThenAwait for an owned Stream. It needs no reset of the
// readiness before the write: a readiness left over from bytes already read wakes the wait
// at once, and the Read that follows then finds nothing and waits as usual.
func (s *Stream) writeThenAwaitOwned(p []byte) (sent int, writeErr, waitErr error) {
	if !s.acquire() {
		return 0, nil, net.ErrClosed
	}
	defer s.release()
	s.drained = false
	s.wbuf, s.wn, s.werrno = p, 0, 0
	errno := s.writeSome(s.fd)
	sent, s.wbuf = s.wn, nil
	switch errno {
	case 0:
		return sent, nil, s.waitReadable()
	case syscall.EAGAIN:
		return sent, nil, nil // the caller writes the rest
	}
	return sent, s.closedUnder(os.NewSyscallError("write", errno)), nil
}
