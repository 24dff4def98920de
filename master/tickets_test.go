package master

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"gw/ipc"
)

var ticketEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ages lists the keys' ages at now, newest first, for failure messages and comparisons.
func ages(set *ticketKeySet, now time.Time) []time.Duration {
	out := make([]time.Duration, len(set.keys))
	for i, k := range set.keys {
		out[i] = now.Sub(k.created)
	}
	return out
}

func sameDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTicketKeyRotation drives one ring through a timeline: at each step rotate runs at
// that time, and the set must hold keys of exactly these ages.
func TestTicketKeyRotation(t *testing.T) {
	h := time.Hour
	steps := []struct {
		at      time.Duration // since the first key
		rotated bool
		ages    []time.Duration
	}{
		{0, false, []time.Duration{0}},
		{12*h - time.Second, false, []time.Duration{12*h - time.Second}},
		{12 * h, true, []time.Duration{0, 12 * h}},
		{18 * h, false, []time.Duration{6 * h, 18 * h}},
		{24 * h, true, []time.Duration{0, 12 * h, 24 * h}},
		// The first key stopped encrypting at 12h: 24h later it is dropped.
		{36 * h, true, []time.Duration{0, 12 * h, 24 * h}},
		{48 * h, true, []time.Duration{0, 12 * h, 24 * h}},
		// Asleep for 30h (a suspended machine, a late timer): the key retired now stays,
		// the one retired at 48h (30h ago) goes.
		{90 * h, true, []time.Duration{0, 42 * h}},
		// Asleep for 50h: only the key retired now is kept.
		{140 * h, true, []time.Duration{0, 50 * h}},
	}
	ring := newTicketKeyRing(nil, ticketEpoch)
	for _, s := range steps {
		now := ticketEpoch.Add(s.at)
		before := ring.keySet()
		rotated := ring.rotate(now)
		after := ring.keySet()
		if rotated != s.rotated {
			t.Fatalf("at %v: rotate = %t, want %t", s.at, rotated, s.rotated)
		}
		if got := ages(after, now); !sameDurations(got, s.ages) {
			t.Fatalf("at %v: key ages %v, want %v", s.at, got, s.ages)
		}
		select {
		case <-before.replaced:
			if !rotated {
				t.Fatalf("at %v: the set was marked replaced without a rotation", s.at)
			}
			if after == before || after.keys[0].secret == before.keys[0].secret {
				t.Fatalf("at %v: rotated without a new key first", s.at)
			}
			if after.keys[1] != before.keys[0] {
				t.Fatalf("at %v: the previous encrypting key is not second", s.at)
			}
		default:
			if rotated || after != before {
				t.Fatalf("at %v: a rotation did not mark the old set replaced", s.at)
			}
		}
		if want := after.keys[0].created.Add(ticketKeyRotation); !ring.nextRotation().Equal(want) {
			t.Fatalf("at %v: next rotation %v, want %v", s.at, ring.nextRotation(), want)
		}
	}
}

// TestTicketKeysResumeForTheWholeWindow rotates on time for a week and checks, every hour,
// that a ticket issued up to ticketResumeWindow ago can still be decrypted, and that no key
// is kept once it has not encrypted for ticketResumeWindow.
func TestTicketKeysResumeForTheWholeWindow(t *testing.T) {
	ring := newTicketKeyRing(nil, ticketEpoch)
	issuedWith := map[time.Time][32]byte{} // every hour: the key that encrypted a ticket then
	for hour := time.Duration(0); hour <= 7*24*time.Hour; hour += time.Hour {
		now := ticketEpoch.Add(hour)
		if !now.Before(ring.nextRotation()) {
			ring.rotate(now)
		}
		set := ring.keySet()
		issuedWith[now] = set.keys[0].secret
		held := map[[32]byte]bool{}
		for _, k := range set.keys {
			held[k.secret] = true
			if retiredFor := now.Sub(k.created) - ticketKeyRotation; retiredFor >= ticketResumeWindow {
				t.Fatalf("at %v: a key created %v ago is still kept", hour, now.Sub(k.created))
			}
		}
		for issued, key := range issuedWith {
			if now.Sub(issued) <= ticketResumeWindow && !held[key] {
				t.Fatalf("at %v: a ticket issued %v ago no longer decrypts", hour, now.Sub(issued))
			}
		}
		if len(set.keys) > 3 {
			t.Fatalf("at %v: %d keys, want at most 3", hour, len(set.keys))
		}
	}
}

func TestTicketKeyRingFromAnUpgrade(t *testing.T) {
	h := time.Hour
	old := []ticketKey{newTicketKey(ticketEpoch.Add(-5 * h)), newTicketKey(ticketEpoch.Add(-17 * h))}
	ring := newTicketKeyRing(old, ticketEpoch)
	if got := ages(ring.keySet(), ticketEpoch); !sameDurations(got, []time.Duration{5 * h, 17 * h}) {
		t.Fatalf("handed-over keys not kept as they were: ages %v", got)
	}
	if ring.keySet().keys[0].secret != old[0].secret {
		t.Fatal("the handed-over encrypting key is not the one encrypting")
	}
	if !ring.nextRotation().Equal(ticketEpoch.Add(7 * h)) {
		t.Fatalf("next rotation %v, want 7h from now", ring.nextRotation().Sub(ticketEpoch))
	}
	// A set handed over long ago (the upgrade waited, or the clock moved) rotates at once.
	stale := newTicketKeyRing([]ticketKey{newTicketKey(ticketEpoch.Add(-40 * h))}, ticketEpoch)
	if got := ages(stale.keySet(), ticketEpoch); !sameDurations(got, []time.Duration{0, 40 * h}) {
		t.Fatalf("stale hand-over: ages %v, want a new key then the old one", got)
	}
}

func TestTicketKeysAreRandom(t *testing.T) {
	seen := map[[32]byte]bool{}
	for range 100 {
		k := newTicketKey(ticketEpoch)
		if seen[k.secret] || k.secret == [32]byte{} {
			t.Fatalf("key %x repeated or zero", k.secret)
		}
		seen[k.secret] = true
	}
}

func TestTicketKeysHandOverEncoding(t *testing.T) {
	keys := []ticketKey{newTicketKey(ticketEpoch), newTicketKey(ticketEpoch.Add(-12 * time.Hour)), newTicketKey(ticketEpoch.Add(-24 * time.Hour))}
	got, err := decodeTicketKeys(encodeTicketKeys(keys))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d keys back, want %d", len(got), len(keys))
	}
	for i := range keys {
		if got[i].secret != keys[i].secret || !got[i].created.Equal(keys[i].created) {
			t.Fatalf("key %d came back as %v, want %v", i, got[i].created, keys[i].created)
		}
	}

	good := encodeTicketKeys(keys[:1])
	withCount := func(n byte) []byte {
		b := bytes.Clone(good)
		b[len(ticketKeysMagic)+1] = n
		return b
	}
	tooMany := make([]ticketKey, maxTicketKeys+1)
	rejects := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only, short", []byte("gwtk")},
		{"bad magic", append([]byte("xxtk"), good[4:]...)},
		{"other version", append([]byte("gwtk\x02"), good[5:]...)},
		{"no keys", []byte("gwtk\x01\x00")},
		{"more keys than allowed", encodeTicketKeys(tooMany)},
		{"count above the records", withCount(2)},
		{"truncated record", good[:len(good)-1]},
		{"trailing bytes", append(bytes.Clone(good), 0)},
	}
	for _, r := range rejects {
		t.Run(r.name, func(t *testing.T) {
			if _, err := decodeTicketKeys(r.data); !errors.Is(err, errTicketKeys) {
				t.Fatalf("decode = %v, want errTicketKeys", err)
			}
		})
	}
}

// TestTicketKeysFileIsEmptiedOnRead hands keys over through a real memfd.
func TestTicketKeysFileIsEmptiedOnRead(t *testing.T) {
	keys := []ticketKey{newTicketKey(ticketEpoch)}
	f, err := ticketKeysFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err != nil || !strings.HasPrefix(target, "/memfd:") {
		t.Fatalf("the hand-over is %q (%v), want an anonymous memfd", target, err)
	}
	got, err := readTicketKeysFile(f)
	if err != nil || len(got) != 1 || got[0].secret != keys[0].secret {
		t.Fatalf("read back %d keys, %v", len(got), err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		t.Fatalf("after reading, the memfd holds %d bytes (%v), want 0", st.Size(), err)
	}
	if _, err := readTicketKeysFile(f); !errors.Is(err, errTicketKeys) {
		t.Fatalf("reading an emptied hand-over: %v, want errTicketKeys", err)
	}
}

func FuzzDecodeTicketKeys(f *testing.F) {
	f.Add(encodeTicketKeys([]ticketKey{newTicketKey(ticketEpoch)}))
	f.Add([]byte("gwtk\x01\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := decodeTicketKeys(data)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeTicketKeys(keys), data) {
			t.Fatalf("accepted %x but encodes back differently", data)
		}
	})
}

// TestRotationReachesTheWorker: a worker set up with one set gets each set that replaces
// it, whole, in a KindTicketKeys frame, until it exits.
func TestRotationReachesTheWorker(t *testing.T) {
	ring := newTicketKeyRing(nil, ticketEpoch)
	masterEnd, workerEnd := net.Pipe()
	w := &workerProc{conn: ipc.NewConn(masterEnd), exited: make(chan struct{})}
	worker := ipc.NewConn(workerEnd)
	defer worker.Close()
	m := &Master{tickets: ring}
	setUp := ring.keySet() // what the setup frame held
	done := make(chan struct{})
	go func() {
		m.forwardTicketKeys(w, setUp)
		close(done)
	}()
	for _, after := range []time.Duration{12 * time.Hour, 24 * time.Hour} {
		ring.rotate(ticketEpoch.Add(after))
		frame, err := worker.Receive()
		if err != nil {
			t.Fatal(err)
		}
		var got ipc.TicketKeys
		if frame.Kind != ipc.KindTicketKeys || frame.Decode(&got) != nil {
			t.Fatalf("after %v: got a %s frame %q", after, frame.Kind, frame.Payload)
		}
		want := ring.keySet().wire()
		if len(got.Keys) != len(want) {
			t.Fatalf("after %v: %d keys, want %d", after, len(got.Keys), len(want))
		}
		for i := range want {
			if !bytes.Equal(got.Keys[i], want[i]) {
				t.Fatalf("after %v: key %d differs from the ring's", after, i+1)
			}
		}
	}
	close(w.exited)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("forwardTicketKeys went on after the worker exited")
	}
}
