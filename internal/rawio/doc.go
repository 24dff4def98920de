// Package rawio reads and writes a connected, non-blocking socket with raw system calls,
// still parking on Go's poller (and so keeping the connection's deadlines) when the socket
// is not ready.
//
// net.Conn's Read and Write enter the runtime's syscall state around every call, as for a
// call that may block. A socket the poller owns never blocks, so for it that is pure cost:
// entering and leaving the state, and, worse, the runtime's monitor thread watches every
// call made in it. A loopback write that delivers its segment in the same call can take
// tens of microseconds; the monitor then takes the processor away and hands it to another
// thread, and since it did, it keeps waking every 20 µs instead of backing off to 10 ms. On
// a worker with one processor that monitor alone cost 4.5% of the CPU under load. Raw calls
// are invisible to it, as nginx's are to nothing at all: a worker blocks only in epoll.
//
// A Stream can also wait before it reads when its last read emptied the socket and it has
// written since (WaitBeforeReads, poll.go), as nginx does with the readiness it keeps: a
// keep-alive server then reads each request once instead of first finding nothing.
//
// A Stream that owns its descriptor (Own, owned.go) makes those calls and waits itself,
// without net's per-call locking, and closes the connection only when no call of its own
// is in progress.
//
// An Acceptor (socket.go) takes a listener's connections with a raw accept4(2), as a
// Socket that its Stream owns: no getsockname(2), no TCP_NODELAY until a second write
// needs it, no finalizer, no registration with the poller until a call has to wait (a
// connection whose request is there and whose answer fits the socket's buffer never
// joins it), and a raw close(2), none of them through the runtime's syscall state.
//
// Socket.Dial (dial.go) connects a Socket to an upstream node as nginx dials: socket(2),
// connect(2) to the netip.AddrPort as it is (in the runtime's syscall state: on loopback
// the handshake runs inside it), the runtime's poller only for the wait while the
// handshake is in progress, getsockopt(SO_ERROR) after it: no address string, no netFD or
// finalizer, no getsockname(2) or getpeername(2), and no allocation.
//
// KeepAliveOff (listener.go) spares each accepted connection the four keep-alive
// setsockopt(2) calls net makes by default, which nginx does not make.
//
// A PollerTurn (turn.go) lets a goroutine that would otherwise stay runnable, an accept
// loop with a queue, wait until the runtime has polled the network, which it does only
// when nothing is runnable: as an event loop takes its ready sockets between two accepts.
package rawio
