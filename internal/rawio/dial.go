package rawio

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Dialling without net.
//
// A net.Dialer's dial of an upstream node costs, besides socket(2) and connect(2): the
// address formatted to a string by the caller and parsed back, a netFD with its wrappers
// and a finalizer (allocations the collector then chases), the poller's registration, and
// after the connect getsockname(2) and getpeername(2) for the two addresses and
// setsockopt(2) for TCP_NODELAY, every one of those system calls through the runtime's
// syscall state. Under seed 001 (more requests in flight than the keep-alive pool holds,
// so a worker dials and closes upstream connections all the time) that machinery was 12%
// of a worker's CPU, connect(2) itself 1.2%. nginx makes socket, connect, epoll_ctl and,
// once the socket is writable, getsockopt(SO_ERROR).
//
// Socket.Dial makes those calls, raw but for connect(2) (see connect): socket(2)
// non-blocking and close-on-exec, connect(2) to the netip.AddrPort as it is, and, when
// the connect is in progress, a wait for writability on the runtime's poller under the
// dial's deadline, then getsockopt(SO_ERROR). The peer's address is the one dialled; the local one is asked of
// the kernel only when someone wants it (LocalAddr). Unlike net, Dial leaves TCP_NODELAY
// off: a connection that writes once (a request, past the keep-alive pool, then a close)
// never meets Nagle's algorithm, and the caller turns it off (NoDelay) before a write that
// may follow another unacknowledged, as the edge does for a connection kept alive.
//
// Go's dial also guards against a TCP self-connect: a connect to a port of this host on
// which nothing listens can be given that very port as its own, and the socket then talks
// to itself (a simultaneous open). The kernel picks a connection's own port from
// ip_local_port_range, so only a node whose port lies in that range can meet it: for
// those Dial compares the local address with the peer's (one getsockname(2)) and tries
// again, as net does; for the rest (80, 443, 8080, ...) the check is skipped.

// selfConnectTries is how many times Dial connects again after a self-connect, as net.
const selfConnectTries = 2

// Dial connects s, a zero Socket (or one whose last connection Close finished with), to
// addr over TCP, within deadline (zero: none beyond the kernel's own), with TCP_NODELAY
// off (NoDelay turns it on). An IPv4-mapped IPv6 address is dialled as IPv4, as net does. Its errors are net's:
// a *net.OpError whose Err is os.ErrDeadlineExceeded when the deadline passed (its
// Timeout() is true), or the connect's error (ECONNREFUSED, ENETUNREACH, ...). On error s
// holds nothing to close.
func (s *Socket) Dial(addr netip.AddrPort, deadline time.Time) error {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	var sa syscall.RawSockaddrAny
	salen, err := sockaddrOf(addr, &sa)
	if err != nil {
		return dialError(addr, err)
	}
	s.setPeer(&sa)
	for try := 0; ; try++ {
		err := s.connect(&sa, salen, deadline)
		if err != nil {
			return dialError(addr, err)
		}
		if !mayConnectToItself(addr.Port()) || !s.connectedToItself(&sa, salen) {
			return nil
		}
		_ = s.Close()
		if try == selfConnectTries {
			// Nothing listens there, or the kernel would not have given its port out.
			return dialError(addr, os.NewSyscallError("connect", syscall.ECONNREFUSED))
		}
	}
}

// sockaddrOf fills sa with addr and returns its length.
func sockaddrOf(addr netip.AddrPort, sa *syscall.RawSockaddrAny) (uintptr, error) {
	ip := addr.Addr()
	switch {
	case ip.Is4():
		in := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		in.Family = syscall.AF_INET
		port := (*[2]byte)(unsafe.Pointer(&in.Port))
		port[0], port[1] = byte(addr.Port()>>8), byte(addr.Port())
		in.Addr = ip.As4()
		return syscall.SizeofSockaddrInet4, nil
	case ip.Is6():
		in := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
		in.Family = syscall.AF_INET6
		port := (*[2]byte)(unsafe.Pointer(&in.Port))
		port[0], port[1] = byte(addr.Port()>>8), byte(addr.Port())
		in.Addr = ip.As16()
		if zone := ip.Zone(); zone != "" {
			index, err := zoneIndex(zone)
			if err != nil {
				return 0, err
			}
			in.Scope_id = index
		}
		return syscall.SizeofSockaddrInet6, nil
	}
	return 0, errors.New("rawio: no IP address to dial")
}

// zoneIndex is an IPv6 zone's interface index: the interface's name, or its number.
func zoneIndex(zone string) (uint32, error) {
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index), nil
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	return 0, errors.New("rawio: no interface " + strconv.Quote(zone) + " for the address's zone")
}

func dialError(addr netip.AddrPort, err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(addr), Err: err}
}

// connect makes s a new socket connected to sa, or returns why it could not (the socket
// closed).
func (s *Socket) connect(sa *syscall.RawSockaddrAny, salen uintptr, deadline time.Time) error {
	var timeout int64
	if !deadline.IsZero() {
		if timeout = int64(time.Until(deadline)); timeout <= 0 {
			return os.ErrDeadlineExceeded // as net: no connect once the deadline passed
		}
	}
	fd, _, errno := syscall.RawSyscall(syscall.SYS_SOCKET, uintptr(sa.Addr.Family),
		syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if errno != 0 {
		return os.NewSyscallError("socket", errno)
	}
	s.fd = int(fd)
	s.pd.Store(0)
	s.unblocked.Store(false)
	s.state.Store(0)
	s.noDelay.Store(false)
	s.laddr.Store(nil)
	// A non-blocking connect(2) never waits for the peer, but it is the one call here made
	// in the runtime's syscall state: to a node on this host the kernel runs the whole
	// handshake inside it, tens of microseconds, and the runtime may meanwhile hand the
	// processor to other goroutines (answers that give connections back to the pool).
	// Made raw, it held the processor throughout, and under seed 001 the worker dialled
	// 1.5 to 3.4 times as often in the same rounds (connect(2) per request 0.034-0.227
	// against 0.017-0.066), costing more than the raw call saves.
	_, _, errno = syscall.Syscall(syscall.SYS_CONNECT, fd, uintptr(unsafe.Pointer(sa)), salen)
	switch errno {
	case 0, syscall.EISCONN:
	case syscall.EINPROGRESS, syscall.EALREADY, syscall.EINTR:
		if err := s.awaitConnected(timeout); err != nil {
			_ = s.Close()
			return err
		}
	default:
		_ = s.Close()
		return os.NewSyscallError("connect", errno)
	}
	return nil
}

// awaitConnected waits until the connect in progress ended, within timeout (0: none), and
// returns how it ended. The socket joins the poller for it, as it would for its first wait
// anyway; the write deadline the wait needed is cleared after it.
func (s *Socket) awaitConnected(timeout int64) error {
	pd, err := s.register()
	if err != nil {
		return err
	}
	if timeout > 0 {
		runtimePollSetDeadline(pd, timeout, 'w')
	}
	for {
		if code := runtimePollWait(pd, 'w'); code != pollNoError {
			return errOf(code)
		}
		var soErr int32
		size := uint32(unsafe.Sizeof(soErr))
		_, _, errno := syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, uintptr(s.fd), syscall.SOL_SOCKET, syscall.SO_ERROR,
			uintptr(unsafe.Pointer(&soErr)), uintptr(unsafe.Pointer(&size)), 0)
		if errno != 0 {
			return os.NewSyscallError("getsockopt", errno)
		}
		switch errno := syscall.Errno(soErr); errno {
		case 0, syscall.EISCONN:
			if timeout > 0 {
				runtimePollSetDeadline(pd, 0, 'w')
			}
			return nil
		case syscall.EINPROGRESS, syscall.EALREADY, syscall.EINTR:
			// Woken before the handshake ended: wait on.
		default:
			return os.NewSyscallError("connect", errno)
		}
	}
}

// setsockoptInt is setsockopt(2) of an int option outside the runtime's syscall state: it
// never blocks.
func setsockoptInt(fd, level, name, value int) syscall.Errno {
	v := int32(value)
	_, _, errno := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name),
		uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
	return errno
}

// connectedToItself reports whether s's own address is the one it dialled, sa (see
// above), asking the kernel with a raw getsockname(2) into a buffer on the stack.
func (s *Socket) connectedToItself(sa *syscall.RawSockaddrAny, salen uintptr) bool {
	var local syscall.RawSockaddrAny
	size := uint32(syscall.SizeofSockaddrAny)
	_, _, errno := syscall.RawSyscall(syscall.SYS_GETSOCKNAME, uintptr(s.fd), uintptr(unsafe.Pointer(&local)),
		uintptr(unsafe.Pointer(&size)))
	if errno != 0 || uintptr(size) != salen {
		return false
	}
	switch sa.Addr.Family {
	case syscall.AF_INET:
		a, b := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa)), (*syscall.RawSockaddrInet4)(unsafe.Pointer(&local))
		return a.Family == b.Family && a.Port == b.Port && a.Addr == b.Addr
	case syscall.AF_INET6:
		a, b := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa)), (*syscall.RawSockaddrInet6)(unsafe.Pointer(&local))
		return a.Family == b.Family && a.Port == b.Port && a.Addr == b.Addr
	}
	return false
}

var (
	localPortsOnce           sync.Once
	localPortLo, localPortHi uint16
)

// mayConnectToItself reports whether a connect to port may be given port as its own: it
// lies in the kernel's ip_local_port_range (every port when that cannot be read).
func mayConnectToItself(port uint16) bool {
	localPortsOnce.Do(func() {
		localPortLo, localPortHi = 1, 65535
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
		if err != nil {
			return
		}
		fields := strings.Fields(string(b))
		if len(fields) != 2 {
			return
		}
		lo, err1 := strconv.ParseUint(fields[0], 10, 16)
		hi, err2 := strconv.ParseUint(fields[1], 10, 16)
		if err1 == nil && err2 == nil && lo <= hi {
			localPortLo, localPortHi = uint16(lo), uint16(hi)
		}
	})
	return port >= localPortLo && port <= localPortHi
}
