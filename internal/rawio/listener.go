package rawio

import (
	"net"
	"reflect"
	"unsafe"
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
