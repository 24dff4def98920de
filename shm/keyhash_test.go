package shm

import "testing"

// A key written in pieces hashes as it does whole, and short keys that differ in any way
// (order, length, a trailing zero byte) hash apart.
func TestKeyHash(t *testing.T) {
	const seed = 0x9e3779b97f4a7c15
	whole := NewKeyHash(seed)
	whole.WriteString("route\x001\x00count=5;time_window=60\x00192.168.1.100")
	sum := whole.Sum()
	for _, split := range [][]string{
		{"route\x001\x00count=5;time_window=60\x00", "192.168.1.100"},
		{"r", "oute\x001\x00count=5;time_window=60\x00192.1", "68.1.100"},
		{"route\x001\x00count=5;time_window=60\x00192.168.1.10", "0"},
	} {
		h := NewKeyHash(seed)
		for i, piece := range split {
			if i%2 == 0 {
				h.WriteString(piece)
			} else {
				h.Write([]byte(piece))
			}
		}
		if h.Sum() != sum {
			t.Errorf("hash of %q differs from the whole", split)
		}
	}
	seen := map[uint64]string{}
	for _, s := range []string{"", "a", "b", "ab", "ba", "a\x00", "\x00a", "12345678", "123456789", "1234567", "12345678\x00"} {
		h := NewKeyHash(seed)
		h.WriteString(s)
		if prev, dup := seen[h.Sum()]; dup {
			t.Errorf("%q and %q hash alike", s, prev)
		}
		seen[h.Sum()] = s
	}
	a, b := NewKeyHash(seed), NewKeyHash(seed+2)
	a.WriteString("x")
	b.WriteString("x")
	if a.Sum() == b.Sum() {
		t.Error("two seeds hash alike")
	}
}

func BenchmarkKeyHash(b *testing.B) {
	base := NewKeyHash(0x9e3779b97f4a7c15)
	base.WriteString("route\x001\x00count=2000000000000;time_window=60;key_type=\"var\";key=\"remote_addr\"\x00")
	ip := []byte{192, 168, 1, 100}
	b.ReportAllocs()
	for b.Loop() {
		h := base
		h.Write(ip)
		_ = h.Sum()
	}
}
