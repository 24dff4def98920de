package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Stream reads and writes one socket through its syscall.RawConn. One Read and one Write
// may run at the same time (a tunnel's two directions), as on a net.Conn; its zero value
// is not usable: call Init. It allocates nothing per call.
type Stream struct {
	raw     syscall.RawConn
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool

	// The state of the Read in progress: the buffer, and what the call did.
	rbuf   []byte
	rn     int
	rerrno syscall.Errno
	// The state of the Write in progress: the bytes, how many went, why it stopped.
	wbuf   []byte
	wn     int
	werrno syscall.Errno
}

// Init binds s to raw; the callbacks are bound once here so that no call allocates.
func (s *Stream) Init(raw syscall.RawConn) {
	s.raw = raw
	s.readFn = s.readOnce
	s.writeFn = s.writeAll
}

// Read reads what is there into p, waiting on the poller (under the read deadline) until
// something is. Like net.Conn's, it returns io.EOF when the peer closed its side, and an
// error for which errors.Is finds the errno (ECONNRESET) or os.ErrDeadlineExceeded.
func (s *Stream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // as net.Conn: a zero-byte read reads nothing, not EOF
	}
	s.rbuf, s.rn, s.rerrno = p, 0, 0
	err := s.raw.Read(s.readFn)
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
	n, errno := Read(fd, s.rbuf)
	if errno == syscall.EAGAIN {
		return false // park until readable
	}
	s.rn, s.rerrno = n, errno
	return true
}

// Write writes all of p, waiting on the poller (under the write deadline) while the socket's
// buffer is full. On error it returns how much went before it.
func (s *Stream) Write(p []byte) (int, error) {
	s.wbuf, s.wn, s.werrno = p, 0, 0
	err := s.raw.Write(s.writeFn)
	n, errno := s.wn, s.werrno
	s.wbuf = nil
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}

func (s *Stream) writeAll(fd uintptr) bool {
	for s.wn < len(s.wbuf) {
		n, errno := Write(fd, s.wbuf[s.wn:])
		if errno == syscall.EAGAIN {
			return false // park until writable, then go on from s.wn
		}
		if errno != 0 {
			s.werrno = errno
			return true
		}
		s.wn += n
	}
	return true
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
