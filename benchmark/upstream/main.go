// Command upstream is the benchmark's origin server: every request, whatever its method
// or path, gets 200 and the same fixed body, on a kept-alive connection. It shares the
// load CPUs with wrk, and whatever it spends there is taken from wrk: when the load CPUs
// saturate before the gateway's, the benchmark measures them instead of the gateway. So it
// does as little as nginx's `return 200` does: one goroutine runs an epoll loop over
// non-blocking sockets, and a request costs a read and a write. Those calls never block,
// so they are made raw, outside the runtime's system call bookkeeping, with gw's worker's
// own internal/rawio: through the bookkeeping, the runtime's monitor thread takes the
// processor away from a loopback write it sees as slow, and the next call has to win it
// back.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"gw/internal/rawio"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:1980", "address to listen on")
	size := flag.Int("body", 10, "body size in bytes; 10 is APISIX's benchmark body, 1234567890")
	flag.Parse()
	if *size < 0 || *size > 64<<20 {
		fmt.Fprintf(os.Stderr, "upstream: -body %d: want 0 to %d bytes\n", *size, 64<<20)
		os.Exit(2)
	}
	addr, err := netip.ParseAddrPort(*listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upstream: -listen %q: want ip:port (%v)\n", *listen, err)
		os.Exit(2)
	}
	s, err := newServer(addr, makeBody(*size))
	if err == nil {
		err = s.serve()
	}
	fmt.Fprintf(os.Stderr, "upstream: %v\n", err)
	os.Exit(1)
}

// makeBody repeats APISIX's 1234567890 to n bytes.
func makeBody(n int) []byte {
	return bytes.Repeat([]byte("1234567890"), n/10+1)[:n]
}

// response is the whole answer to every request; closing is the same with Connection:
// close, for a request that asked for it.
func response(body []byte, close bool) []byte {
	head := "HTTP/1.1 200 OK\r\nServer: upstream\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	if close {
		head += "Connection: close\r\n"
	}
	return append([]byte(head+"\r\n"), body...)
}

var (
	badRequest     = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	notImplemented = []byte("HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// maxHeader bounds a request's line and header; past it the connection gets 400.
const maxHeader = 64 << 10

type server struct {
	listener int
	epoll    int
	answer   []byte
	closing  []byte
	conns    []*conn // by descriptor
}

// conn is one client connection. Responses are answered in order: owed counts the ones
// still to write after the one being written (out, from its start at written).
type conn struct {
	fd      int
	in      []byte // bytes read and not yet taken by a whole request
	skip    int    // body bytes of the last request still to discard
	out     []byte // the response being written; nil when none
	written int
	owed    int
	last    []byte // what owed responses are: the answer, or a closing one for the final
	closing bool   // close once out and owed are written
	writing bool   // waiting for EPOLLOUT rather than EPOLLIN
}

func newServer(addr netip.AddrPort, body []byte) (*server, error) {
	family := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	s := &server{listener: fd, epoll: ep, answer: response(body, false), closing: response(body, true)}
	if err := s.watch(fd, unix.EPOLLIN, unix.EPOLL_CTL_ADD); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *server) watch(fd int, events uint32, op int) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(s.epoll, op, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// serve runs the loop, level-triggered: a connection is watched for input, or for room to
// write while a response is unfinished, never both.
func (s *server) serve() error {
	events := make([]unix.EpollEvent, 256)
	buf := make([]byte, 64<<10)
	for {
		// Only a wait that finds nothing ready blocks, through the runtime.
		n, err := pollNow(s.epoll, events)
		if err == nil && n == 0 {
			n, err = unix.EpollWait(s.epoll, events, -1)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == s.listener {
				s.accept()
				continue
			}
			if fd >= len(s.conns) || s.conns[fd] == nil {
				continue
			}
			c := s.conns[fd]
			if c.writing {
				s.flush(c)
			} else {
				s.read(c, buf)
			}
		}
	}
}

func (s *server) accept() {
	for {
		fd, _, err := unix.Accept4(s.listener, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN, or a connection gone before its accept: the next event retries
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		if err := s.watch(fd, unix.EPOLLIN, unix.EPOLL_CTL_ADD); err != nil {
			unix.Close(fd)
			continue
		}
		for fd >= len(s.conns) {
			s.conns = append(s.conns, nil)
		}
		s.conns[fd] = &conn{fd: fd}
	}
}

func (s *server) close(c *conn) {
	s.conns[c.fd] = nil
	unix.Close(c.fd) // leaves the epoll set with its last descriptor
}

// read takes what the socket has, answers every whole request in it, and writes.
func (s *server) read(c *conn, buf []byte) {
	n, errno := rawio.Read(uintptr(c.fd), buf)
	if errno == unix.EAGAIN {
		return
	}
	if errno != 0 || n == 0 {
		s.close(c) // a reset or EOF
		return
	}
	data := buf[:n]
	if c.skip > 0 {
		k := min(c.skip, len(data))
		c.skip -= k
		data = data[k:]
	}
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		data = c.in
	}
	for len(data) > 0 && c.skip == 0 && !c.closing {
		end := bytes.Index(data, []byte("\r\n\r\n"))
		if end < 0 {
			if len(data) > maxHeader {
				s.answerLast(c, badRequest)
				data = nil
			}
			break
		}
		length, chunked, closeAfter := scanHeader(data[:end+2])
		data = data[end+4:]
		switch {
		case length < 0:
			s.answerLast(c, badRequest)
			continue // closing: the rest is dropped
		case chunked:
			s.answerLast(c, notImplemented)
			continue
		case closeAfter:
			s.answerLast(c, s.closing)
		default:
			s.answerOne(c)
		}
		k := min(length, len(data))
		c.skip = length - k
		data = data[k:]
	}
	if c.closing {
		data = nil
	}
	c.in = append(c.in[:0], data...)
	s.flush(c)
}

func (s *server) answerOne(c *conn) {
	if c.out == nil {
		c.out, c.written = s.answer, 0
	} else {
		c.owed++
		c.last = s.answer
	}
}

// answerLast queues a final response; the connection closes once it is written.
func (s *server) answerLast(c *conn, r []byte) {
	if c.out == nil {
		c.out, c.written = r, 0
	} else {
		c.owed++
		c.last = r
	}
	c.closing = true
}

// flush writes what is owed until done or the socket is full, then watches for what
// comes next: input, room to write, or nothing (closed).
func (s *server) flush(c *conn) {
	for c.out != nil {
		n, errno := rawio.Write(uintptr(c.fd), c.out[c.written:])
		if errno == unix.EAGAIN {
			if !c.writing {
				c.writing = true
				if s.watch(c.fd, unix.EPOLLOUT, unix.EPOLL_CTL_MOD) != nil {
					s.close(c)
				}
			}
			return
		}
		if errno != 0 {
			s.close(c)
			return
		}
		c.written += n
		if c.written < len(c.out) {
			continue
		}
		c.out, c.written = nil, 0
		if c.owed > 0 {
			c.owed--
			c.out = s.answer
			if c.owed == 0 {
				c.out = c.last
			}
		}
	}
	if c.closing {
		s.close(c)
		return
	}
	if c.writing {
		c.writing = false
		if s.watch(c.fd, unix.EPOLLIN, unix.EPOLL_CTL_MOD) != nil {
			s.close(c)
		}
	}
}

// scanHeader reads a request's header block (without the blank line) for what framing
// and keep-alive need: the body's length (-1 when malformed), whether it is chunked, and
// whether the connection closes after the answer: asked for, or HTTP/1.0 without
// keep-alive.
func scanHeader(block []byte) (length int, chunked, closeAfter bool) {
	requestLine, rest, _ := bytes.Cut(block, []byte("\r\n"))
	closeAfter = bytes.HasSuffix(requestLine, []byte("HTTP/1.0"))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return -1, false, true
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			switch {
			case bytes.EqualFold(value, []byte("close")):
				closeAfter = true
			case bytes.EqualFold(value, []byte("keep-alive")):
				closeAfter = false
			}
		}
	}
	return length, chunked, closeAfter
}

// pollNow is epoll_wait that does not wait.
func pollNow(epoll int, events []unix.EpollEvent) (int, error) {
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epoll), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
