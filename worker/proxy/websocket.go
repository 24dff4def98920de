package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/monotime"
)

// Websocket tunnels (enable_websocket). A request that asks for a protocol upgrade
// (Connection: upgrade with an Upgrade header) is sent with its Upgrade header on a
// connection of its own; when the node answers 101, the client connection is hijacked from
// the server, the 101 is relayed, and bytes are copied both ways until either side closes
// or the tunnel has been idle for the read timeout (nginx's proxy_read_timeout, which bounds
// idle websockets behind APISIX too). The node connection never returns to its pool. Any
// other answer is an ordinary response.

var (
	connectionUpgrade = []byte("upgrade")
	tokenUpgrade      = []byte("upgrade")
	switchingLine     = []byte("HTTP/1.1 101 Switching Protocols\r\n")
)

// tunnelBufSize is each direction's copy buffer.
const tunnelBufSize = 16 << 10

// wantsUpgrade reports whether the client asks to switch protocols: an Upgrade header and
// the upgrade token in Connection.
func wantsUpgrade(h *fasthttp.RequestHeader) bool {
	if len(h.Peek(fasthttp.HeaderUpgrade)) == 0 {
		return false
	}
	for _, v := range h.PeekAll(fasthttp.HeaderConnection) {
		for token := range bytes.SplitSeq(v, comma) {
			if bytes.EqualFold(bytes.TrimSpace(token), tokenUpgrade) {
				return true
			}
		}
	}
	return false
}

// startTunnel arranges for the client connection to be handed over once the handler
// returns. The 101 is written by the tunnel itself rather than by the server, so that the
// hand-over happens whatever the handler does to the response afterwards (a draining
// worker's Connection: close would otherwise make the server skip it and leak c).
// ctx.Response keeps the node's 101 for the log. inflight, when not nil, is released
// when the tunnel ends.
func (u *Upstream) startTunnel(ctx *fasthttp.RequestCtx, c *upConn, inflight *atomic.Int64) {
	t := &tunnel{
		node:     c,
		head:     switchingHead(&ctx.Response.Header),
		idle:     u.readTimeout,
		send:     u.sendTimeout,
		inflight: inflight,
	}
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(t.run)
}

// openTunnels counts the websocket tunnels running in this process. fasthttp forgets a
// connection once it is hijacked, so a draining worker asks here before it exits.
var openTunnels atomic.Int64

// OpenTunnels returns how many upgraded connections this process is relaying.
func OpenTunnels() int64 { return openTunnels.Load() }

// switchingHead is the 101 sent to the client: the node's headers less the hop-by-hop ones,
// then Connection: upgrade (the node's Upgrade header stays: it names the protocol).
func switchingHead(h *fasthttp.ResponseHeader) []byte {
	head := append([]byte(nil), switchingLine...)
	for name, value := range h.All() {
		if dropFromSwitching(name) {
			continue
		}
		head = append(head, name...)
		head = append(head, ": "...)
		head = append(head, value...)
		head = append(head, "\r\n"...)
	}
	return append(head, "Connection: upgrade\r\n\r\n"...)
}

func dropFromSwitching(name []byte) bool {
	if bytes.EqualFold(name, []byte(fasthttp.HeaderUpgrade)) {
		return false
	}
	if bytes.EqualFold(name, []byte(fasthttp.HeaderContentLength)) || bytes.EqualFold(name, []byte(fasthttp.HeaderContentType)) {
		// fasthttp reports these even when the node sent none.
		return true
	}
	for _, hop := range hopByHop {
		if bytes.EqualFold(name, []byte(hop)) {
			return true
		}
	}
	return false
}

// tunnel relays one upgraded connection.
type tunnel struct {
	node     *upConn
	head     []byte
	idle     time.Duration // the tunnel closes after this long without a byte either way
	send     time.Duration // the longest wait for one write to either side
	inflight *atomic.Int64

	lastActive atomic.Int64 // monotime.Now of the last byte moved
	stopping   atomic.Bool
}

// run is the hijack handler: it owns client until it returns, and the server closes
// client afterwards.
func (t *tunnel) run(client net.Conn) {
	openTunnels.Add(1)
	defer func() {
		openTunnels.Add(-1)
		t.node.close()
		if t.inflight != nil {
			t.inflight.Add(-1)
		}
	}()
	// upConn's own per-call deadlines are replaced by the tunnel's idle rule.
	t.node.readTimeout, t.node.writeTimeout = 0, 0
	t.node.tunnelled()
	t.lastActive.Store(monotime.Now())
	if err := writeWithin(client, t.head, t.send); err != nil {
		return
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.clientToNode(client)
	}()
	t.nodeToClient(client)
	// The node side is done: stop the other direction and wait for it, since the server
	// reuses client's wrapper once run returns.
	t.stopping.Store(true)
	t.node.close()
	_ = client.SetReadDeadline(time.Unix(1, 0))
	wg.Wait()
}

// nodeToClient copies from the node (its buffered reader first: bytes may have arrived
// with the 101) until the node closes, fails or the tunnel idles out.
func (t *tunnel) nodeToClient(client net.Conn) {
	buf := make([]byte, tunnelBufSize)
	for {
		_ = t.node.conn.SetReadDeadline(time.Now().Add(t.idle))
		n, err := t.node.br.Read(buf)
		if n > 0 {
			t.lastActive.Store(monotime.Now())
			if werr := writeWithin(client, buf[:n], t.send); werr != nil {
				return
			}
		}
		if err != nil {
			if isTimeout(err) && !t.idledOut() {
				continue
			}
			return
		}
	}
}

// clientToNode copies from the client. When the client half-closes, the node is told the
// same way and the node side carries on until the node closes.
func (t *tunnel) clientToNode(client net.Conn) {
	buf := make([]byte, tunnelBufSize)
	for {
		if t.stopping.Load() {
			return
		}
		_ = client.SetReadDeadline(time.Now().Add(t.idle))
		n, err := client.Read(buf)
		if n > 0 {
			t.lastActive.Store(monotime.Now())
			if werr := writeWithin(t.node.conn, buf[:n], t.send); werr != nil {
				t.node.close()
				return
			}
		}
		if err != nil {
			if t.stopping.Load() {
				return
			}
			if isTimeout(err) && !t.idledOut() {
				continue
			}
			if tc, ok := t.node.conn.(interface{ CloseWrite() error }); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
				return
			}
			// Reset, or idle: end the node side too.
			t.node.close()
			return
		}
	}
}

// idledOut reports whether nothing has moved either way for the idle timeout.
func (t *tunnel) idledOut() bool {
	return time.Duration(monotime.Now()-t.lastActive.Load()) >= t.idle
}

func writeWithin(c net.Conn, b []byte, timeout time.Duration) error {
	if err := c.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		return err
	}
	_, err := c.Write(b)
	return err
}
