package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Stream reads and writes one socket through its syscall.RawConn. One Read and one Write
// may run at the same time (a tunnel's two directions), as on a net.Conn; its zero value
// is not usable: call Init. It allocates nothing per call.
type Stream struct {
	raw     syscall.RawConn
	waiter  Waiter // nil: the deadlines are the caller's alone
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
	awaitFn func(fd uintptr) bool

	// pollDesc is the runtime's poll descriptor (see poll.go), found when reads may wait
	// first or when s owns its descriptor. inq is set when reads may wait first: they go
	// through recv, with TCP_INQ on (inq.go), and drained is set when the last one left
	// nothing behind, not even a FIN, so that the next one waits before it reads if a
	// write has succeeded since (wrote; see waitsFirst). Writes set wrote and a draining
	// read clears it; reads look at it only while drained, which a Stream read and written
	// at the same time (a tunnel: WaitBeforeReads off) never is.
	pollDesc uintptr
	inq      bool
	recv     receiver
	drained  bool
	wrote    bool
	waitFn   func(fd uintptr)
	pollCode int
	reads    int // read system calls made (tests count them)

	// owned is set when s makes its own calls on fd (Own, owned.go); state counts the
	// calls in progress and marks a Close, which closeFn (or, without one, sock's Close)
	// carries out.
	owned   bool
	fd      uintptr
	state   atomic.Uint64
	closeFn func() error
	// sock is the Socket an owned Stream reads and writes, which joins the poller only
	// when a call first waits (pollDesc stays 0 then: waitDesc asks it each time); nil for
	// a net connection, whose pollDesc is found once.
	sock *Socket

	// The state of the Read in progress: the buffer, what the call did, and whether it
	// was tried at all.
	rbuf   []byte
	rn     int
	rerrno syscall.Errno
	rtried bool
	// The state of the Write (or WriteThenAwait) in progress: the bytes, how many went, why
	// it stopped.
	wbuf   []byte
	wn     int
	werrno syscall.Errno
	wtried bool
	woke   bool // WriteThenAwait's wait began
}

// A Waiter arms a Stream's deadlines only when a read or write is about to wait, since
// only a wait can outlast one: a call that finds the socket ready reads no clock and
// moves no timer. ArmRead and ArmWrite are called just before the Stream parks, from the
// goroutine reading or writing. With stale set, the deadline armed for an earlier wait has
// passed since, while nobody waited, and the call failed without trying: the Waiter arms
// afresh, and the call is tried once more. Returning false leaves the deadline alone (it
// is someone else's to set), and a stale failure is then returned as it is.
type Waiter interface {
	ArmRead(stale bool) bool
	ArmWrite(stale bool) bool
}

// Init binds s to raw, with waiter (or nil) arming its deadlines. It allocates nothing:
// the callbacks the calls through raw take are bound on their first use, once each, so
// that no later call allocates, and a Stream that owns its Socket (Own), whose calls never
// go through raw, never binds them: a connection that serves one request then costs one
// allocation in all, its edgeConn.
func (s *Stream) Init(raw syscall.RawConn, waiter Waiter) {
	s.raw = raw
	s.waiter = waiter
}

// succeed is raw.Read's callback when the call is only to learn the descriptor's error.
func succeed(uintptr) bool { return true }

// WaitBeforeReads makes a Read that follows one which emptied the socket, and a Write
// since (waitsFirst says why), wait for it to become readable before it reads, instead of
// reading first, and reports whether it could (poll.go, inq.go): a keep-alive
// connection's server then reads once per request, not twice. It costs a setsockopt(2),
// which a connection that serves one request and closes need not pay: it can be turned on
// between any two reads, and turning it on again is free. Every read of the socket must go
// through s while it is on; turn it off before handing the connection to code that reads
// it otherwise. Only the goroutine that reads s may call it, between reads. Turning it off
// also ends Own's own calls: those of a connection handed over go through net again.
func (s *Stream) WaitBeforeReads(on bool) bool {
	if on && s.inq {
		return true
	}
	s.drained = false
	if !on {
		// sock stays: a Close without closeFn closes it.
		s.pollDesc, s.inq, s.owned = 0, false, false
		return false
	}
	if s.pollDesc == 0 && !s.owned {
		s.pollDesc = pollDescOf(s.raw)
	}
	switch {
	case s.owned: // a net connection's pollDesc was found by Own; a Socket's comes when needed
		// The reference keeps a Close from freeing the descriptor under the call.
		if s.acquire() {
			s.inq = enableInq(s.fd)
			s.release()
		}
	case s.pollDesc == 0:
	default:
		var inq bool
		if s.raw.Control(func(fd uintptr) { inq = enableInq(fd) }) == nil {
			s.inq = inq
		}
	}
	return s.inq
}

// ReadCalls is how many read system calls s has made: tests count them. Only the goroutine
// that reads s may call it.
func (s *Stream) ReadCalls() int { return s.reads }

// expiredUntried reports whether err is a deadline that had passed before the call tried
// anything.
func expiredUntried(err error, tried bool) bool {
	return err != nil && !tried && errors.Is(err, os.ErrDeadlineExceeded)
}

// Read reads what is there into p, waiting on the poller (under the read deadline) until
// something is. Like net.Conn's, it returns io.EOF when the peer closed its side, and an
// error for which errors.Is finds the errno (ECONNRESET) or os.ErrDeadlineExceeded.
func (s *Stream) Read(p []byte) (int, error) {
	if s.owned {
		return s.readOwned(p)
	}
	if len(p) == 0 {
		return 0, nil // as net.Conn: a zero-byte read reads nothing, not EOF
	}
	if s.waitsFirst() {
		if err := s.awaitReadable(); err != nil {
			return 0, err
		}
	}
	s.rbuf, s.rn, s.rerrno, s.rtried = p, 0, 0, false
	if s.readFn == nil {
		s.readFn = s.readOnce // the reading goroutine's own field: bound once, no race
	}
	err := s.raw.Read(s.readFn)
	if expiredUntried(err, s.rtried) && s.waiter != nil && s.waiter.ArmRead(true) {
		err = s.raw.Read(s.readFn)
	}
	n, errno := s.rn, s.rerrno
	s.rbuf = nil
	switch {
	case err != nil:
		return 0, err // the poller's: a deadline, or the connection closed under us
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s *Stream) readOnce(fd uintptr) bool {
	s.rtried = true
	s.reads++
	var n, left int
	var errno syscall.Errno
	if s.inq {
		n, left, errno = s.recv.read(fd, s.rbuf)
	} else {
		n, errno = recv(fd, s.rbuf)
	}
	if errno == syscall.EAGAIN {
		if s.waiter != nil {
			s.waiter.ArmRead(false)
		}
		return false // park until readable
	}
	s.rn, s.rerrno = n, errno
	s.drained = s.inq && errno == 0 && n > 0 && left == 0
	if s.drained {
		s.wrote = false
	}
	return true
}

// waitsFirst reports whether the next read may wait before it reads, and uses up the
// drained mark. TCP_INQ counts a FIN but not a reset: when one came with the last bytes, it
// said nothing was left, and the reset's event may have been taken with theirs, so a wait
// would last until the deadline. A write that succeeded since rules that out, since a write
// to a reset socket fails: so the read waits first only after one (a keep-alive server
// answers, then reads the next request), and reads first after a read (a body still
// coming), finding the reset if there is one.
func (s *Stream) waitsFirst() bool {
	wait := s.drained && s.wrote
	s.drained = false
	return wait
}

// awaitReadable waits on the poller without clearing the socket's readiness first (see
// poll.go), under the deadline the waiter arms for it. An error is the poller's, as a
// read would have returned it: a deadline that passed in the wait, or a Close.
func (s *Stream) awaitReadable() error {
	if s.waiter != nil {
		s.waiter.ArmRead(false)
	}
	// Control holds a reference on the descriptor, so a Close from another goroutine wakes
	// the wait (pollErrClosing) but cannot free the poll descriptor under it.
	if s.waitFn == nil {
		s.waitFn = s.await
	}
	if err := s.raw.Control(s.waitFn); err != nil {
		return err
	}
	if s.pollCode == pollErrTimeout || s.pollCode == pollErrClosing {
		// raw.Read checks the descriptor before it calls succeed, and so returns the error
		// net.Conn would, reading nothing.
		return s.raw.Read(succeed)
	}
	return nil
}

func (s *Stream) await(uintptr) { s.pollCode = runtimePollWait(s.pollDesc, 'r') }

// Write writes all of p, waiting on the poller (under the write deadline) while the socket's
// buffer is full. On error it returns how much went before it.
func (s *Stream) Write(p []byte) (int, error) {
	if s.owned {
		return s.writeOwned(p)
	}
	s.wbuf, s.wn, s.werrno, s.wtried = p, 0, 0, false
	if s.writeFn == nil {
		s.writeFn = s.writeAll // the writing goroutine's own field
	}
	err := s.raw.Write(s.writeFn)
	if expiredUntried(err, s.wtried) && s.waiter != nil && s.waiter.ArmWrite(true) {
		err = s.raw.Write(s.writeFn)
	}
	n, errno := s.wn, s.werrno
	s.wbuf = nil
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	s.wrote = true
	return n, nil
}

func (s *Stream) writeAll(fd uintptr) bool {
	s.wtried = true
	if s.writeSome(fd) == syscall.EAGAIN {
		if s.waiter != nil {
			s.waiter.ArmWrite(false)
		}
		return false // park until writable, then go on from s.wn
	}
	return true
}

// writeSome writes s.wbuf from s.wn on until all of it went (0), the socket is full
// (EAGAIN), or the write failed (the errno, also left in s.werrno).
func (s *Stream) writeSome(fd uintptr) syscall.Errno {
	for s.wn < len(s.wbuf) {
		n, errno := send(fd, s.wbuf[s.wn:])
		if errno == syscall.EAGAIN {
			return errno
		}
		if errno != 0 {
			s.werrno = errno
			return errno
		}
		s.wn += n
	}
	return 0
}

// WriteThenAwait writes what of p the socket takes now and, when it took all of it,
// waits until the socket is readable, under the read deadline: a request's last bytes
// go out with the wait for the answer, so the Read that follows finds it instead of
// first finding nothing. The write happens inside a raw read, after the poller's
// readiness was cleared, so that the answer's cannot be lost between the write and the
// wait. It returns how much went, the write's error (an errno) if it failed, and the
// wait's (a deadline, a close), which the caller reports from its next Read. When the
// socket took only part of p and nothing failed, the caller writes the rest and reads as
// usual. It is a read and a write: no Read may run at the same time.
func (s *Stream) WriteThenAwait(p []byte) (sent int, writeErr, waitErr error) {
	if s.owned {
		return s.writeThenAwaitOwned(p)
	}
	s.wbuf, s.wn, s.werrno, s.woke = p, 0, 0, false
	s.drained = false // the wait consumes the readiness a wait-first read would
	if s.awaitFn == nil {
		s.awaitFn = s.writeThenPark // no Read runs meanwhile: no race
	}
	waitErr = s.raw.Read(s.awaitFn)
	if !s.woke && expiredUntried(waitErr, false) && s.waiter != nil && s.waiter.ArmRead(true) {
		// The deadline armed for an earlier wait passed while the connection was idle:
		// nothing was sent, so arm a fresh one and start again.
		waitErr = s.raw.Read(s.awaitFn)
	}
	sent, errno := s.wn, s.werrno
	s.wbuf = nil
	if errno != 0 {
		writeErr = os.NewSyscallError("write", errno)
	}
	return sent, writeErr, waitErr
}

// writeThenPark is WriteThenAwait's callback. Its first call sends and, when all of it
// went, returns false so that the runtime parks until the descriptor is readable; the
// second call ends the wait, leaving the read itself to the next Read.
func (s *Stream) writeThenPark(fd uintptr) bool {
	if s.woke {
		return true
	}
	s.woke = true
	if s.writeSome(fd) != 0 {
		return true // the socket is full, or the write failed: no wait
	}
	if s.waiter != nil {
		s.waiter.ArmRead(false)
	}
	return false
}

// Read is read(2) on a non-blocking descriptor without the runtime's syscall bookkeeping,
// retried on EINTR. It must never be called on a descriptor that can block.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if errno != syscall.EINTR {
			if errno != 0 {
				return 0, errno
			}
			return int(n), 0
		}
	}
}

// Write is write(2) as Read is read(2): one call, which may write less than p.
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if errno != syscall.EINTR {
			if errno != 0 {
				return 0, errno
			}
			return int(n), 0
		}
	}
}

// A Stream's descriptor is always a socket, so it reads with recv(2) and writes with
// send(2) rather than read(2) and write(2): those go through the file layer (vfs_write's
// checks and notifications, the position lock's lookup) before they reach the socket's,
// which recv and send enter directly, as nginx's recv(2) and writev(2) do. Under seed
// 001 (a new connection per request, perf on both workers), the file layer's share of
// gw's writes was twice nginx's share of its writevs: about 2% of the worker's CPU.
// send also takes MSG_NOSIGNAL: a write to a connection the peer reset fails with EPIPE
// as before, without a SIGPIPE for the runtime to take and ignore.

// send is send(2) with MSG_NOSIGNAL, as Write is write(2).
func send(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
			syscall.MSG_NOSIGNAL, 0, 0)
		if errno != syscall.EINTR {
			if errno != 0 {
				return 0, errno
			}
			return int(n), 0
		}
	}
}

// recv is recv(2), as Read is read(2).
func recv(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
			0, 0, 0)
		if errno != syscall.EINTR {
			if errno != 0 {
				return 0, errno
			}
			return int(n), 0
		}
	}
}

// OpError wraps an error from Stream the way net.Conn's methods do, so that callers that
// look for *net.OpError (and its Timeout) see what they would from c itself. io.EOF and nil
// pass through. The poller's own errors already come as *net.OpError.
func OpError(op string, c net.Conn, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if _, ok := err.(*net.OpError); ok {
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
