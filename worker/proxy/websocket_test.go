package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha1" //nolint:gosec // RFC 6455 fixes SHA-1 for the accept key
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
)

// A websocket echo node and client, by hand with the standard library (RFC 6455: the
// handshake, and unfragmented frames up to 64 KiB).

// startWSEcho accepts websocket handshakes and echoes every frame's payload back. A
// request without Upgrade is answered 400 with the headers it saw.
func startWSEcho(t *testing.T) *stub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &stub{addr: ln.Addr().String(), port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go serveWSEcho(c)
		}
	}()
	return s
}

func serveWSEcho(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nX-Seen-Upgrade: "+ //nolint:errcheck
			req.Header.Get("Upgrade")+"\r\nX-Seen-Connection: "+req.Header.Get("Connection")+"\r\n\r\n")
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))  //nolint:gosec
	io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+ //nolint:errcheck
		"Sec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
	for {
		op, payload, err := readFrame(br)
		if err != nil || op == 8 { // close
			return
		}
		if writeFrame(c, op, payload, false) != nil {
			return
		}
	}
}

// readFrame reads one frame, unmasking a masked payload.
func readFrame(r *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	op = h[0] & 0x0f
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err = io.ReadFull(r, l[:]); err != nil {
			return 0, nil, err
		}
		n = int(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err = io.ReadFull(r, l[:]); err != nil {
			return 0, nil, err
		}
		n = int(binary.BigEndian.Uint64(l[:]))
	}
	var mask [4]byte
	masked := h[1]&0x80 != 0
	if masked {
		if _, err = io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return op, payload, nil
}

// writeFrame writes one final frame; clients mask theirs.
func writeFrame(w io.Writer, op byte, payload []byte, mask bool) error {
	frame := []byte{0x80 | op}
	maskBit := byte(0)
	if mask {
		maskBit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, maskBit|byte(n))
	case n < 1<<16:
		frame = append(frame, maskBit|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(n))
	default:
		frame = append(frame, maskBit|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	body := payload
	if mask {
		key := [4]byte{0x12, 0x34, 0x56, 0x78}
		frame = append(frame, key[:]...)
		body = make([]byte, len(payload))
		for i := range payload {
			body[i] = payload[i] ^ key[i%4]
		}
	}
	_, err := w.Write(append(frame, body...))
	return err
}

// dialWS opens a websocket through addr and returns the connection, its reader and the
// handshake response.
func dialWS(t *testing.T, addr, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))                                                                  //nolint:errcheck
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: ws.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+ //nolint:errcheck
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the handshake response: %v", err)
	}
	return c, br, resp
}

func TestWebsocketTunnel(t *testing.T) {
	node := startWSEcho(t)
	up, _ := newUpstream(t, &conf.Upstream{Type: "least_conn", Nodes: conf.Nodes{node.node(1)}})
	proxy := startProxy(t, up.WithWebsocket())

	c, br, resp := dialWS(t, proxy, "/ws")
	if resp.StatusCode != 101 {
		t.Fatalf("handshake answered %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Errorf("Sec-WebSocket-Accept = %q, want RFC 6455's example answer", got)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") || !strings.EqualFold(resp.Header.Get("Connection"), "upgrade") {
		t.Errorf("101 headers %v", resp.Header)
	}
	for _, msg := range [][]byte{[]byte("hello"), bytes.Repeat([]byte("x"), 40000)} {
		if err := writeFrame(c, 1, msg, true); err != nil {
			t.Fatal(err)
		}
		op, echo, err := readFrame(br)
		if err != nil || op != 1 || !bytes.Equal(echo, msg) {
			t.Fatalf("echo of %d bytes: op %d, %d bytes, %v", len(msg), op, len(echo), err)
		}
	}
	if n := up.state.inflight[0].Load(); n != 1 {
		t.Errorf("an open tunnel counts %d in flight, want 1", n)
	}
	writeFrame(c, 8, nil, true) //nolint:errcheck
	// The node closes after the close frame; the tunnel then closes the client side.
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after close, client read %v, want EOF", err)
	}
	if !waitUntil(func() bool { return up.state.inflight[0].Load() == 0 }) {
		t.Errorf("closed tunnel still counted in flight")
	}
}

func TestUpgradeWithoutWebsocketIsAPlainRequest(t *testing.T) {
	node := startWSEcho(t)
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{node.node(1)}})
	proxy := startProxy(t, up)
	_, _, resp := dialWS(t, proxy, "/ws")
	if resp.StatusCode != 400 || resp.Header.Get("X-Seen-Upgrade") != "" || resp.Header.Get("X-Seen-Connection") != "" {
		t.Errorf("status %d, node saw Upgrade %q and Connection %q; want 400 with both dropped",
			resp.StatusCode, resp.Header.Get("X-Seen-Upgrade"), resp.Header.Get("X-Seen-Connection"))
	}
}

func TestWebsocketRouteRelaysARefusal(t *testing.T) {
	refusing := startStub(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(403)
		ctx.Response.Header.Set("X-Seen-Upgrade", string(ctx.Request.Header.Peek("Upgrade")))
		ctx.WriteString("no") //nolint:errcheck
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{refusing.node(1)}})
	proxy := startProxy(t, up.WithWebsocket())
	_, _, resp := dialWS(t, proxy, "/ws")
	body := make([]byte, 2)
	io.ReadFull(resp.Body, body) //nolint:errcheck
	if resp.StatusCode != 403 || string(body) != "no" || resp.Header.Get("X-Seen-Upgrade") != "websocket" {
		t.Errorf("status %d body %q, node saw Upgrade %q; want 403 \"no\", websocket", resp.StatusCode, body, resp.Header.Get("X-Seen-Upgrade"))
	}
	// An ordinary request on a websocket route is proxied as usual.
	if status, b := get(t, proxy, "/plain"); status != 403 || b != "no" {
		t.Errorf("plain request: %d %q", status, b)
	}
}

func TestWebsocketIdleTimeout(t *testing.T) {
	node := startWSEcho(t)
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{node.node(1)},
		Timeout: &conf.Timeout{Connect: 1, Send: 1, Read: 0.3}})
	proxy := startProxy(t, up.WithWebsocket())
	c, br, resp := dialWS(t, proxy, "/ws")
	if resp.StatusCode != 101 {
		t.Fatalf("handshake answered %d", resp.StatusCode)
	}
	// Traffic within the timeout keeps the tunnel open past it.
	for range 4 {
		time.Sleep(150 * time.Millisecond)
		writeFrame(c, 1, []byte("ping"), true) //nolint:errcheck
		if _, _, err := readFrame(br); err != nil {
			t.Fatalf("tunnel closed while in use: %v", err)
		}
	}
	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle tunnel: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("idle tunnel closed after %v, want about 0.3s", d)
	}
}
