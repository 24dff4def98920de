package ipc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

func TestRoundTripOverSocketpair(t *testing.T) {
	master, remote, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	worker, err := FromFile(remote)
	remote.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()

	big := bytes.Repeat([]byte("x"), 3<<20) // larger than any socket buffer
	go func() {
		_ = worker.SendJSON(KindHello, Hello{PID: 42, Slot: 1, Version: "v"})
		_ = worker.Send(KindConfig, big)
	}()
	f, err := master.Receive()
	if err != nil {
		t.Fatal(err)
	}
	var h Hello
	if err := f.Decode(&h); err != nil || f.Kind != KindHello || h.PID != 42 || h.Slot != 1 {
		t.Fatalf("got %v %+v %v", f.Kind, h, err)
	}
	f, err = master.Receive()
	if err != nil || f.Kind != KindConfig || !bytes.Equal(f.Payload, big) {
		t.Fatalf("big frame: kind %v len %d err %v", f.Kind, len(f.Payload), err)
	}
}

func TestConcurrentSendersNeverInterleave(t *testing.T) {
	a, b := net.Pipe()
	sender, receiver := NewConn(a), NewConn(b)
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			payload := bytes.Repeat([]byte{byte('a' + i)}, 1000+i)
			for j := 0; j < each; j++ {
				if err := sender.Send(KindAck, payload); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	for n := 0; n < senders*each; n++ {
		f, err := receiver.Receive()
		if err != nil {
			t.Fatal(err)
		}
		first := f.Payload[0]
		if len(f.Payload) != 1000+int(first-'a') || bytes.Count(f.Payload, []byte{first}) != len(f.Payload) {
			t.Fatalf("frame %d torn: len %d", n, len(f.Payload))
		}
	}
	wg.Wait()
}

func TestReceiveErrors(t *testing.T) {
	cases := []struct {
		name string
		wire []byte
		want error
	}{
		{"clean EOF", nil, io.EOF},
		{"bad magic", []byte("xx\x01\x05\x00\x00\x00\x00"), ErrBadMagic},
		{"other version", []byte("gw\x09\x05\x00\x00\x00\x00"), ErrVersion},
		{"oversized", []byte("gw\x01\x05\xff\xff\xff\xff"), ErrOversized},
		{"cut header", []byte("gw\x01"), io.ErrUnexpectedEOF},
		{"cut payload", []byte("gw\x01\x05\x00\x00\x00\x09abc"), io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConn(nopCloser{bytes.NewReader(tc.wire)})
			_, err := c.Receive()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// A child process that dies without a word must show up as EOF on the master's side: the
// orphan guard and the respawn logic both rest on it.
func TestPeerDeathIsEOF(t *testing.T) {
	master, remote, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	cmd := exec.Command("sh", "-c", "kill -9 $$")
	cmd.ExtraFiles = []*os.File{remote}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	remote.Close()
	_ = cmd.Wait()
	if _, err := master.Receive(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestKindString(t *testing.T) {
	if KindConfig.String() != "config" || !strings.HasPrefix(Kind(99).String(), "kind(") {
		t.Fatal(KindConfig.String(), Kind(99).String())
	}
}

type nopCloser struct{ io.Reader }

func (nopCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopCloser) Close() error                { return nil }
