package plugins

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// addrConn is a connection that only has addresses, and counts how often its local one
// is asked for.
type addrConn struct {
	net.Conn
	local     net.TCPAddr
	localAsks int
}

func (c *addrConn) LocalAddr() net.Addr  { c.localAsks++; return &c.local }
func (c *addrConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 1} }

// ServerPort reads a connection's port once and keeps it for the connection's next
// requests, whichever connection the Ctx served before; without a connection (port 0 as
// fasthttp gives it) it reads each time.
func TestServerPortIsReadOncePerConnection(t *testing.T) {
	var c Ctx
	var req fasthttp.RequestCtx
	a := &addrConn{local: net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9080}}
	req.Init2(a, nil, false)
	for range 3 {
		c.Begin(&req, nil, time.Now().UnixNano())
		if got := string(c.ServerPort()); got != "9080" {
			t.Fatalf("ServerPort = %q, want 9080", got)
		}
		c.End()
	}
	if a.localAsks != 1 {
		t.Errorf("the local address was read %d times for 3 requests of one connection", a.localAsks)
	}
	// Another connection on the same RequestCtx (fasthttp's pool, an HTTP/2 stream): its own port.
	b := &addrConn{local: net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9443}}
	req.Init2(b, nil, false)
	c.Begin(&req, nil, time.Now().UnixNano())
	if got := string(c.ServerPort()); got != "9443" {
		t.Errorf("ServerPort of a new connection = %q, want 9443", got)
	}
	c.End()
	var bare fasthttp.RequestCtx
	c.Begin(&bare, nil, time.Now().UnixNano())
	if got := string(c.ServerPort()); got != "0" {
		t.Errorf("ServerPort without a connection = %q, want fasthttp's 0", got)
	}
}
