package rawio

import (
	"errors"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Accepting and closing without net.
//
// A connection a *net.TCPListener accepts costs, besides accept4(2) and the poller's
// registration: getsockname(2) for its local address, setsockopt(2) for TCP_NODELAY, two
// address allocations and four more for the netFD and its wrappers, a finalizer set and
// cleared, and every one of those system calls made through the runtime's syscall state,
// which wakes its monitor thread; its close goes through the descriptor's lock and the
// syscall state again. Under seed 001 (a new connection per request) accept and close were
// 23% of a worker's CPU. nginx makes accept4, epoll_ctl and close.
//
// An Acceptor takes a connection with a raw accept4(2) when the listener's poller says it
// is readable (inside the listener's syscall.RawConn's Control, so that a listener Close
// never frees the descriptor under the call), and hands it over as a Socket: the peer's
// address is what accept4 returned, the local one the listener's when it names one address
// (else getsockname(2), once, when asked), and TCP_NODELAY is the caller's to set when it
// needs it (Socket.NoDelay). A Socket's system calls are raw; its waits and deadlines are
// the runtime's poller, reached by name as internal/poll reaches it.
//
// A Socket joins the poller only when a call first has to wait, or a deadline is set
// (register). A connection that serves one request usually never waits: its request is
// in the socket by the time the worker accepts it, and its answer fits the socket's
// buffer. Registering it on accept cost an epoll_ctl(2) to add it and another to remove it
// on close, and the poller's next epoll_wait(2) reported the new socket as writable for
// nothing: the kernel said so the moment it was added. nginx adds a connection to epoll
// once and lets close(2) take it out. A socket added after a read found nothing loses no
// wake-up: epoll_ctl(2) reports the readiness the socket has when it is added, so bytes
// that came between the read and the registration wake the wait at once.
//
// A Socket guards its descriptor as an owned Stream does (owned.go): every call holds a
// reference, Close marks it closing and wakes whoever is parked, and whoever drops the
// last reference unregisters (if it was registered) and closes the descriptor, so it is
// closed exactly once and never under a call. Nothing closes a Socket that is dropped
// without Close: its owner must close it (a worker's server always does).

//go:linkname runtimePollOpen internal/poll.runtime_pollOpen
func runtimePollOpen(fd uintptr) (uintptr, int)

//go:linkname runtimePollClose internal/poll.runtime_pollClose
func runtimePollClose(ctx uintptr)

//go:linkname runtimePollUnblock internal/poll.runtime_pollUnblock
func runtimePollUnblock(ctx uintptr)

//go:linkname runtimePollReset internal/poll.runtime_pollReset
func runtimePollReset(ctx uintptr, mode int) int

//go:linkname runtimePollSetDeadline internal/poll.runtime_pollSetDeadline
func runtimePollSetDeadline(ctx uintptr, d int64, mode int)

// Socket is one accepted TCP connection (Acceptor.Accept). It has no Read or Write of its
// own: a Stream reads and writes it (SyscallConn, Stream.Own). Safe for concurrent use.
type Socket struct {
	fd    int
	state atomic.Uint64 // stateClosing, stateClosed and references, as a Stream's

	// pd is the runtime's poll descriptor, 0 until the socket is registered (register,
	// under registering). unblocked is set once the poller was told the socket is closing,
	// which must happen exactly once before its poll descriptor is freed, whichever of
	// Close and a registration racing with it sees the other.
	pd          atomic.Uintptr
	registering sync.Mutex
	unblocked   atomic.Bool

	raddr   net.TCPAddr
	rip     [16]byte
	laddr   atomic.Pointer[net.TCPAddr]
	noDelay atomic.Bool
}

// Acceptor accepts a listener's connections as Sockets. One Accept runs at a time.
type Acceptor struct {
	mu    sync.Mutex
	ln    *net.TCPListener
	raw   syscall.RawConn
	pd    uintptr      // the listener's poll descriptor
	local *net.TCPAddr // the listener's address, nil when it is a wildcard
	fn    func(fd uintptr)

	// The Accept in progress: where the connection goes, what accept4 said.
	sa       syscall.RawSockaddrAny
	salen    uint32
	nfd      int
	errno    syscall.Errno
	pollCode int
	// waited is whether the last Accept parked on the poller (Waited).
	waited bool
}

// NewAcceptor makes an Acceptor of ln, which it does not own: closing ln ends an Accept in
// progress and every one after.
func NewAcceptor(ln *net.TCPListener) (*Acceptor, error) {
	raw, err := ln.SyscallConn()
	if err != nil {
		return nil, err
	}
	// A listener's RawConn has no Read to wait in (it returns EINVAL): Accept waits on the
	// listener's poll descriptor itself, inside Control, whose reference keeps a Close
	// from freeing the descriptor until the wait it wakes has ended.
	p := findPollPath(raw)
	if p.conn == nil {
		return nil, errors.New("rawio: no poll descriptor found in the listener")
	}
	netFD := *(*unsafe.Pointer)(unsafe.Add(reflect.ValueOf(raw).UnsafePointer(), p.fdField))
	var fd uintptr
	if netFD == nil || raw.Control(func(d uintptr) { fd = d }) != nil || uintptr(*(*int)(unsafe.Add(netFD, p.sysfd))) != fd {
		return nil, errors.New("rawio: the listener's poll descriptor is not where it was looked for")
	}
	a := &Acceptor{ln: ln, raw: raw, pd: *(*uintptr)(unsafe.Add(netFD, p.runtimeCtx))}
	if addr, ok := ln.Addr().(*net.TCPAddr); ok && !addr.IP.IsUnspecified() && addr.Zone == "" {
		a.local = addr
	}
	a.fn = a.accept
	return a, nil
}

// accept is accept4(2) on the listening descriptor, waiting on the poller while the queue
// is empty, under the listener's reference.
func (a *Acceptor) accept(lfd uintptr) {
	a.waited = false
	for {
		a.salen = syscall.SizeofSockaddrAny
		fd, _, errno := syscall.RawSyscall6(syscall.SYS_ACCEPT4, lfd, uintptr(unsafe.Pointer(&a.sa)),
			uintptr(unsafe.Pointer(&a.salen)), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
		switch errno {
		case 0:
			a.nfd, a.errno, a.pollCode = int(fd), 0, pollNoError
			return
		case syscall.EAGAIN:
			a.waited = true
			if a.pollCode = runtimePollWait(a.pd, 'r'); a.pollCode != pollNoError {
				return
			}
			continue
		case syscall.EINTR, syscall.ECONNABORTED:
			continue // as net does: the next one in the queue
		}
		a.nfd, a.errno, a.pollCode = -1, errno, pollNoError
		return
	}
}

// Accept waits for the next connection and makes s of it. s must be a zero Socket (or one
// whose last connection Close finished with). Its errors are net's: a *net.OpError whose Err is
// net.ErrClosed once the listener is closed, or the system call's error (a temporary one,
// EMFILE, says so as net's does).
func (a *Acceptor) Accept(s *Socket) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.raw.Control(a.fn); err != nil {
		return &net.OpError{Op: "accept", Net: "tcp", Addr: a.ln.Addr(), Err: err}
	}
	if a.pollCode != pollNoError {
		return &net.OpError{Op: "accept", Net: "tcp", Addr: a.ln.Addr(), Err: errOf(a.pollCode)}
	}
	if a.errno != 0 {
		return &net.OpError{Op: "accept", Net: "tcp", Addr: a.ln.Addr(), Err: os.NewSyscallError("accept4", a.errno)}
	}
	s.fd = a.nfd
	s.pd.Store(0) // registered when a call first waits (register)
	s.unblocked.Store(false)
	s.state.Store(0)
	s.noDelay.Store(false)
	s.laddr.Store(a.local)
	s.setPeer(&a.sa)
	return nil
}

// Waited reports whether the last Accept found the queue empty and parked on the poller:
// whoever accepts next knows that the runtime polled the network since (a wake-up on the
// poller comes from a poll), which is what a PollerTurn waits for.
func (a *Acceptor) Waited() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waited
}

// setPeer fills the remote address from what accept4 returned, as net's sockaddrToTCP.
func (s *Socket) setPeer(sa *syscall.RawSockaddrAny) {
	s.raddr = net.TCPAddr{}
	switch sa.Addr.Family {
	case syscall.AF_INET:
		in := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := (*[2]byte)(unsafe.Pointer(&in.Port))
		s.raddr.Port = int(port[0])<<8 | int(port[1])
		s.raddr.IP = append(s.rip[:0], in.Addr[:]...)
	case syscall.AF_INET6:
		in := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
		port := (*[2]byte)(unsafe.Pointer(&in.Port))
		s.raddr.Port = int(port[0])<<8 | int(port[1])
		s.raddr.IP = append(s.rip[:0], in.Addr[:]...)
		if in.Scope_id != 0 {
			s.raddr.Zone = zoneName(int(in.Scope_id))
		}
	}
}

// zoneName is an interface index as net names it: the interface's name, or the number.
func zoneName(index int) string {
	if ifi, err := net.InterfaceByIndex(index); err == nil {
		return ifi.Name
	}
	return strconv.Itoa(index)
}

func (s *Socket) acquire() bool {
	if s.state.Add(stateRef)&stateClosing != 0 {
		s.release()
		return false
	}
	return true
}

// release drops a reference; the last one after Close began unregisters and closes the
// descriptor.
func (s *Socket) release() error {
	if s.state.Add(^(stateRef - 1)) != stateClosing {
		return nil
	}
	if !s.state.CompareAndSwap(stateClosing, stateClosing|stateClosed) {
		return nil
	}
	// No registration can be in progress: it holds a reference.
	if pd := s.pd.Load(); pd != 0 {
		s.unblock()
		runtimePollClose(pd)
	}
	return os.NewSyscallError("close", rawClose(s.fd))
}

// register adds the socket to the runtime's poller, once, and returns its poll descriptor.
// The caller holds a reference. A Close that began before the descriptor was published may
// not have seen it: then the registration tells the poller itself, so that the caller's
// wait ends at once with pollErrClosing. (Close sets closing and then reads pd; this
// publishes pd and then reads closing: one of the two sees the other.)
func (s *Socket) register() (uintptr, error) {
	if pd := s.pd.Load(); pd != 0 {
		return pd, nil
	}
	s.registering.Lock()
	defer s.registering.Unlock()
	if pd := s.pd.Load(); pd != 0 {
		return pd, nil // a concurrent call (a tunnel's other direction) registered it
	}
	pd, errno := runtimePollOpen(uintptr(s.fd))
	if errno != 0 {
		return 0, os.NewSyscallError("epoll_ctl", syscall.Errno(errno))
	}
	s.pd.Store(pd)
	if s.state.Load()&stateClosing != 0 {
		s.unblock()
	}
	return pd, nil
}

// Registered reports whether the socket joined the runtime's poller (tests ask).
func (s *Socket) Registered() bool { return s.pd.Load() != 0 }

// unblock tells the poller the socket is closing, waking whoever waits on it, once.
func (s *Socket) unblock() {
	if pd := s.pd.Load(); pd != 0 && s.unblocked.CompareAndSwap(false, true) {
		runtimePollUnblock(pd)
	}
}

// rawClose is close(2) outside the runtime's syscall state: closing a socket without
// SO_LINGER never blocks.
func rawClose(fd int) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0); errno != 0 && errno != syscall.EINTR {
		return errno
	}
	return nil
}

// Close closes the connection, from any goroutine, once: a call parked on the poller
// wakes with net.ErrClosed, and the descriptor is closed when the last call in progress
// ends. Only the first Close reports an error.
func (s *Socket) Close() error {
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
	s.unblock() // the runtime's poller refuses to close a descriptor not woken first
	return s.release()
}

// RemoteAddr is the peer's address, the same *net.TCPAddr every time.
func (s *Socket) RemoteAddr() net.Addr { return &s.raddr }

// LocalAddr is the address the peer connected to: the listener's when it named one, else
// asked of the kernel once.
func (s *Socket) LocalAddr() net.Addr {
	if a := s.laddr.Load(); a != nil {
		return a
	}
	if !s.acquire() {
		return nil
	}
	defer s.release()
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		return nil
	}
	var a *net.TCPAddr
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		a = &net.TCPAddr{IP: sa.Addr[:], Port: sa.Port}
	case *unix.SockaddrInet6:
		a = &net.TCPAddr{IP: sa.Addr[:], Port: sa.Port}
		if sa.ZoneId != 0 {
			a.Zone = zoneName(int(sa.ZoneId))
		}
	default:
		return nil
	}
	s.laddr.Store(a)
	return a
}

// NoDelay turns Nagle's algorithm off (TCP_NODELAY), once: a write that follows another
// before its acknowledgement needs it, a connection that writes once does not.
func (s *Socket) NoDelay() {
	if s.noDelay.Load() || !s.acquire() {
		return
	}
	defer s.release()
	if setsockoptInt(s.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) == 0 {
		s.noDelay.Store(true)
	}
}

// QuickAck acknowledges what the socket received at once (TCP_QUICKACK), where the
// kernel would delay the acknowledgement for up to 40 ms, hoping to send it with data.
// The kernel falls back to delaying later acknowledgements by itself.
func (s *Socket) QuickAck() {
	if !s.acquire() {
		return
	}
	defer s.release()
	_ = unix.SetsockoptInt(s.fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
}

// CloseWrite shuts the sending side down, as net.TCPConn's.
func (s *Socket) CloseWrite() error {
	if !s.acquire() {
		return net.ErrClosed
	}
	defer s.release()
	return os.NewSyscallError("shutdown", syscall.Shutdown(s.fd, syscall.SHUT_WR))
}

func (s *Socket) SetDeadline(t time.Time) error      { return s.setDeadline(t, 'r'+'w') }
func (s *Socket) SetReadDeadline(t time.Time) error  { return s.setDeadline(t, 'r') }
func (s *Socket) SetWriteDeadline(t time.Time) error { return s.setDeadline(t, 'w') }

// setDeadline is internal/poll's setDeadlineImpl: the runtime takes the time left. The
// deadlines live in the poller, so setting one registers the socket; clearing one on a
// socket not registered has nothing to clear.
func (s *Socket) setDeadline(t time.Time, mode int) error {
	var d int64
	if !t.IsZero() {
		if d = int64(time.Until(t)); d == 0 {
			d = -1 // past, not "none"
		}
	}
	if !s.acquire() {
		return net.ErrClosed
	}
	defer s.release()
	pd := s.pd.Load()
	if pd == 0 {
		if t.IsZero() {
			return nil
		}
		var err error
		if pd, err = s.register(); err != nil {
			return err
		}
	}
	runtimePollSetDeadline(pd, d, mode)
	return nil
}

// SyscallConn gives the descriptor to a Stream (or anyone) as net's RawConn does: each
// call under a reference, Read and Write waiting on the poller until the function is done.
func (s *Socket) SyscallConn() (syscall.RawConn, error) { return socketRaw{s}, nil }

type socketRaw struct{ s *Socket }

func (r socketRaw) Control(f func(fd uintptr)) error {
	if !r.s.acquire() {
		return net.ErrClosed
	}
	defer r.s.release()
	f(uintptr(r.s.fd))
	return nil
}

func (r socketRaw) Read(f func(fd uintptr) bool) error  { return r.s.raw(f, 'r') }
func (r socketRaw) Write(f func(fd uintptr) bool) error { return r.s.raw(f, 'w') }

// raw is internal/poll's RawRead and RawWrite: clear the readiness, then call f until it is
// done, waiting for the poller's word between calls.
func (s *Socket) raw(f func(fd uintptr) bool, mode int) error {
	if !s.acquire() {
		return net.ErrClosed
	}
	defer s.release()
	pd := s.pd.Load()
	if pd == 0 {
		// No deadline was ever set (that registers), so none can have passed: try first,
		// and join the poller only when f has to wait.
		if f(uintptr(s.fd)) {
			return nil
		}
		var err error
		if pd, err = s.register(); err != nil {
			return err
		}
	} else if code := runtimePollReset(pd, mode); code != pollNoError {
		return errOf(code)
	}
	for !f(uintptr(s.fd)) {
		if code := runtimePollWait(pd, mode); code != pollNoError {
			return errOf(code)
		}
	}
	return nil
}
