package ipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

// frame builds the wire form of one frame, for seeds.
func frame(kind Kind, payload string) []byte {
	header := []byte{magic[0], magic[1], ProtocolVersion, byte(kind), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(header[4:], uint32(len(payload)))
	return append(header, payload...)
}

// FuzzReceive feeds arbitrary bytes to a reader. It checks that Receive never panics,
// that every error is one a caller can act on, that a forged length field costs memory
// only in proportion to the bytes really sent, and that every frame read back sends as
// the same bytes (the round trip).
func FuzzReceive(f *testing.F) {
	f.Add([]byte{})
	f.Add(frame(KindHello, `{"pid":42,"slot":1,"generation":3,"version":"v"}`))
	f.Add(frame(KindAck, `{"version":7}`))
	f.Add(append(frame(KindConfig, `{"version":1,"routes":[]}`), frame(KindShutdown, `{"mode":"graceful"}`)...))
	f.Add(frame(KindReopen, ""))
	f.Add(frame(Kind(99), "x"))
	f.Add([]byte("xx\x01\x05\x00\x00\x00\x00"))
	f.Add([]byte("gw\x09\x05\x00\x00\x00\x00"))
	f.Add([]byte("gw\x01\x05\xff\xff\xff\xff"))
	f.Add([]byte("gw\x01"))
	f.Add([]byte("gw\x01\x05\x00\x00\x00\x09abc"))
	f.Fuzz(func(t *testing.T, wire []byte) {
		c := NewConn(wireConn{Reader: bytes.NewReader(wire)})
		var sent bytes.Buffer
		echo := NewConn(wireConn{Reader: bytes.NewReader(nil), w: &sent})

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var frames []Frame
		var err error
		for {
			var fr Frame
			if fr, err = c.Receive(); err != nil {
				break
			}
			frames = append(frames, fr)
		}
		runtime.ReadMemStats(&after)
		// The first chunk of a payload, the frames themselves (each at most twice its
		// size while growing), and slack for the fuzzing engine's own allocations.
		if allocated, bound := after.TotalAlloc-before.TotalAlloc, uint64(4*len(wire)+firstPayloadChunk+(1<<20)); allocated > bound {
			t.Fatalf("reading %d bytes allocated %d bytes (bound %d)", len(wire), allocated, bound)
		}

		switch {
		case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrBadMagic),
			errors.Is(err, ErrVersion), errors.Is(err, ErrOversized):
		default:
			t.Fatalf("unexpected error %v", err)
		}
		for _, fr := range frames {
			if err := echo.Send(fr.Kind, fr.Payload); err != nil {
				t.Fatal(err)
			}
		}
		if sent.Len() > len(wire) {
			t.Fatalf("%d bytes read back as %d bytes of frames", len(wire), sent.Len())
		}
		if read := wire[:sent.Len()]; !bytes.Equal(sent.Bytes(), read) {
			t.Fatalf("frames read from %q send as %q", read, sent.Bytes())
		}
		if err == io.EOF && sent.Len() != len(wire) {
			t.Fatalf("clean EOF after %d of %d bytes", sent.Len(), len(wire))
		}
	})
}

// FuzzRoundTrip checks that any kind and payload a sender may send arrives unchanged,
// however the reads are split.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(KindHello), []byte(`{"pid":1}`), uint16(1))
	f.Add(uint8(KindConfig), []byte{}, uint16(7))
	f.Add(uint8(255), bytes.Repeat([]byte{0}, 3000), uint16(300))
	f.Fuzz(func(t *testing.T, kind uint8, payload []byte, readSize uint16) {
		// Longer payloads only make each run slower: growing past firstPayloadChunk is
		// TestRoundTripOverSocketpair's 3 MiB frame.
		payload = payload[:min(len(payload), 8<<10)]
		var wire bytes.Buffer
		sender := NewConn(wireConn{Reader: bytes.NewReader(nil), w: &wire})
		if err := sender.Send(Kind(kind), payload); err != nil {
			t.Fatal(err)
		}
		if err := sender.Send(KindAck, nil); err != nil {
			t.Fatal(err)
		}
		receiver := NewConn(wireConn{Reader: &choppyReader{data: wire.Bytes(), step: int(readSize%512) + 1}})
		got, err := receiver.Receive()
		if err != nil || got.Kind != Kind(kind) || !bytes.Equal(got.Payload, payload) {
			t.Fatalf("sent kind %d with %d bytes, got %v with %d bytes, %v", kind, len(payload), got.Kind, len(got.Payload), err)
		}
		if got, err := receiver.Receive(); err != nil || got.Kind != KindAck || len(got.Payload) != 0 {
			t.Fatalf("second frame: %v %q %v", got.Kind, got.Payload, err)
		}
		if _, err := receiver.Receive(); err != io.EOF {
			t.Fatalf("after the last frame: %v, want io.EOF", err)
		}
	})
}

// choppyReader returns at most step bytes per Read, as a socket may.
type choppyReader struct {
	data []byte
	step int
}

func (r *choppyReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// wireConn reads from Reader and appends what is written to w.
type wireConn struct {
	io.Reader
	w *bytes.Buffer
}

func (c wireConn) Write(b []byte) (int, error) {
	if c.w == nil {
		return len(b), nil
	}
	return c.w.Write(b)
}

func (wireConn) Close() error { return nil }
