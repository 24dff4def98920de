package rawio

import (
	"net"
	"reflect"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Accepting without keep-alive probes.
//
// A *net.TCPListener turns TCP keep-alive on for every connection it accepts unless its
// ListenConfig says otherwise: four setsockopt(2) calls per connection (SO_KEEPALIVE,
// TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT), a quarter of what a connection that serves
// one request costs in system calls. nginx sets none of them unless a listen directive
// asks for so_keepalive, and a gw worker needs none: every wait of a client connection has
// a deadline of its own (client_header_timeout, keepalive_timeout, client_body_timeout,
// send_timeout, a tunnel's idle timeout), which ends a connection to a vanished peer long
// before Go's 15-second probes would have. A listener made with net.ListenConfig could say
// so, but a worker's come from net.FileListener over the master's sockets, which leaves the
// setting at its default and gives no way to change it.

// KeepAliveOff makes ln accept connections with TCP keep-alive left off, and reports whether
// it could: it writes the listener's unexported ListenConfig, found by name and type, so a
// Go release that moved it leaves keep-alive on, as before. Call it before ln's first
// Accept; it must not run concurrently with one.
func KeepAliveOff(ln *net.TCPListener) bool {
	if ln == nil {
		return false
	}
	field := reflect.ValueOf(ln).Elem().FieldByName("lc")
	if !field.IsValid() || field.Type() != reflect.TypeFor[net.ListenConfig]() {
		return false
	}
	lc := (*net.ListenConfig)(unsafe.Pointer(field.UnsafeAddr()))
	// Both: a negative KeepAlive alone is overridden by an enabled KeepAliveConfig.
	lc.KeepAlive = -1
	lc.KeepAliveConfig = net.KeepAliveConfig{}
	return true
}

// Accepting a connection once its first bytes came.
//
// A connection accepted before its request arrived costs a read that finds nothing, then
// the poller's registration (epoll_ctl(2) to add it, another to remove it at close) and a
// wake-up when the request comes. Under seed 001's ab -c 1000 that was most connections:
// the client's handshake completes the connection, and its request follows a moment later.
// TCP_DEFER_ACCEPT makes the kernel hand a connection to accept(2) only once data came,
// so its first read finds the request, and a Socket that never waits never joins the
// poller (socket.go). nginx does the same with `listen ... deferred`.
//
// A client that connects and sends nothing waits in the kernel instead of in the worker,
// where it takes no worker_connections slot: the kernel keeps retransmitting its SYN-ACK for
// about the given time, then hands the connection over anyway (Linux since 2.6.32), and
// client_header_timeout starts from there, so a silent client is cut after about twice
// client_header_timeout, as nginx's deferred listener cuts it after its post-accept
// timeout (client_header_timeout too) and then its client_header_timeout.

// DeferAccept turns TCP_DEFER_ACCEPT on for ln, for wait (rounded up to a second), and
// reports whether it could. It is the listening socket's, shared by every process that
// holds it.
func DeferAccept(ln *net.TCPListener, wait time.Duration) bool {
	if ln == nil || wait <= 0 {
		return false
	}
	raw, err := ln.SyscallConn()
	if err != nil {
		return false
	}
	seconds := int((wait + time.Second - 1) / time.Second)
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, seconds)
	}); err != nil {
		return false
	}
	return serr == nil
}
