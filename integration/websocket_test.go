package integration

import (
	"bufio"
	"bytes"
	"crypto/sha1" //nolint:gosec // RFC 6455 fixes SHA-1 for the accept key
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// enable_websocket through real workers, against a websocket echo node written here with
// the standard library (RFC 6455 handshake, unfragmented frames).

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID)) //nolint:gosec
	return base64.StdEncoding.EncodeToString(sum[:])
}

// startWSEchoNode echoes every frame back. A request that does not ask for a websocket is
// answered 426 with the Upgrade and Connection headers it carried.
func startWSEchoNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
					fmt.Fprintf(c, "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nX-Seen-Upgrade: %s\r\nX-Seen-Connection: %s\r\n\r\n",
						req.Header.Get("Upgrade"), req.Header.Get("Connection"))
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
					wsAccept(req.Header.Get("Sec-WebSocket-Key")))
				for {
					op, payload, err := wsRead(br)
					if err != nil || op == 8 {
						return
					}
					if wsWrite(c, op, payload, false) != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func wsRead(r *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		_, err = io.ReadFull(r, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		_, err = io.ReadFull(r, l[:])
		n = binary.BigEndian.Uint64(l[:])
	}
	if err != nil {
		return 0, nil, err
	}
	var mask [4]byte
	if h[1]&0x80 != 0 {
		if _, err = io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	return h[0] & 0x0f, payload, nil
}

func wsWrite(w io.Writer, op byte, payload []byte, mask bool) error {
	frame := []byte{0x80 | op}
	var maskBit byte
	if mask {
		maskBit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, maskBit|byte(n))
	case n < 1<<16:
		frame = binary.BigEndian.AppendUint16(append(frame, maskBit|126), uint16(n))
	default:
		frame = binary.BigEndian.AppendUint64(append(frame, maskBit|127), uint64(n))
	}
	key := [4]byte{}
	if mask {
		key = [4]byte{0xa1, 0xb2, 0xc3, 0xd4}
		frame = append(frame, key[:]...)
	}
	for i, b := range payload {
		frame = append(frame, b^key[i%4])
	}
	_, err := w.Write(frame)
	return err
}

// wsDial sends a websocket handshake for path on a new connection to address.
func wsDial(t *testing.T, address, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	const key = "x3JJHMbDL1EzLkh9GBhXDw=="
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: chat.example\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, key)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("handshake on %s: %v", path, err)
	}
	return c, br, resp
}

func TestWebsocketEcho(t *testing.T) {
	node := startWSEchoNode(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/ws", fmt.Sprintf(`{"uri":"/ws","enable_websocket":true,"upstream":{"nodes":{%q:1}}}`, node))
	in.mustPut("/apisix/admin/services/s", fmt.Sprintf(`{"enable_websocket":true,"upstream":{"nodes":{%q:1}}}`, node))
	in.mustPut("/apisix/admin/routes/svc", `{"uri":"/svc","service_id":"s"}`)
	in.mustPut("/apisix/admin/routes/plain", fmt.Sprintf(`{"uri":"/plain","upstream":{"nodes":{%q:1}}}`, node))

	// Several tunnels at once, over both workers, each with its own traffic.
	type open struct {
		c  net.Conn
		br *bufio.Reader
	}
	var tunnels []open
	for i := range 6 {
		path := "/ws"
		if i%2 == 1 {
			path = "/svc"
		}
		c, br, resp := wsDial(t, in.data, path)
		if resp.StatusCode != 101 {
			t.Fatalf("%s handshake: %d", path, resp.StatusCode)
		}
		if got := resp.Header.Get("Sec-WebSocket-Accept"); got != wsAccept("x3JJHMbDL1EzLkh9GBhXDw==") {
			t.Errorf("%s: Sec-WebSocket-Accept %q", path, got)
		}
		tunnels = append(tunnels, open{c, br})
	}
	for round := range 3 {
		for i, tn := range tunnels {
			msg := []byte(fmt.Sprintf("tunnel %d round %d", i, round))
			if round == 2 {
				msg = bytes.Repeat(msg, 5000) // ~90 KB, a 64-bit length frame
			}
			if err := wsWrite(tn.c, 2, msg, true); err != nil {
				t.Fatal(err)
			}
			op, echo, err := wsRead(tn.br)
			if err != nil || op != 2 || !bytes.Equal(echo, msg) {
				t.Fatalf("tunnel %d round %d: op %d, %d bytes back of %d, %v", i, round, op, len(echo), len(msg), err)
			}
		}
	}
	for i, tn := range tunnels {
		wsWrite(tn.c, 8, nil, true)
		if _, err := tn.br.ReadByte(); err != io.EOF {
			t.Errorf("tunnel %d after close: %v, want EOF", i, err)
		}
	}

	// Without enable_websocket the handshake is an ordinary request: Upgrade is dropped,
	// and whatever the node answers comes back.
	_, _, resp := wsDial(t, in.data, "/plain")
	if resp.StatusCode != 426 || resp.Header.Get("X-Seen-Upgrade") != "" || resp.Header.Get("X-Seen-Connection") != "" {
		t.Errorf("/plain: %d, node saw Upgrade %q Connection %q; want 426 with both dropped",
			resp.StatusCode, resp.Header.Get("X-Seen-Upgrade"), resp.Header.Get("X-Seen-Connection"))
	}
	// The data port still serves ordinary requests after the tunnels.
	if r, body := in.get("/plain"); r.StatusCode != 426 {
		t.Errorf("GET /plain: %d %q", r.StatusCode, body)
	}
}

// A reload drains the old workers, but a websocket tunnel they relay stays up until
// either side closes it (bounded by worker_shutdown_timeout), as nginx keeps it.
func TestWebsocketSurvivesReload(t *testing.T) {
	node := startWSEchoNode(t)
	in := newInstance(t, "worker_shutdown_timeout: 30s\n")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/ws", fmt.Sprintf(`{"uri":"/ws","enable_websocket":true,"upstream":{"nodes":{%q:1}}}`, node))
	c, br, resp := wsDial(t, in.data, "/ws")
	if resp.StatusCode != 101 {
		t.Fatalf("handshake: %d", resp.StatusCode)
	}
	in.reload()
	time.Sleep(2500 * time.Millisecond) // past the idle grace of the drained workers
	c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := []byte("still here after a reload")
	if err := wsWrite(c, 1, msg, true); err != nil {
		t.Fatal(err)
	}
	if op, echo, err := wsRead(br); err != nil || op != 1 || !bytes.Equal(echo, msg) {
		t.Fatalf("tunnel after reload: op %d %q %v", op, echo, err)
	}
	if draining := in.status().pids("draining"); len(draining) == 0 {
		t.Fatalf("the worker relaying the tunnel should still be draining")
	}
	wsWrite(c, 8, nil, true)
	if !waitFor(5*time.Second, func() bool { return len(in.status().pids("draining")) == 0 }) {
		t.Fatalf("the draining worker did not exit once its tunnel closed: %v", in.status().pids("draining"))
	}
}
