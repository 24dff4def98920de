package limitcount

import (
	"sync/atomic"
	"testing"
)

// One key hit from every goroutine: the worst case, every update contends for one word.
func BenchmarkHitOneKeyParallel(b *testing.B) {
	tbl := newTable(b, 1024)
	fp := fpOf(tbl, "127.0.0.1")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tbl.Hit(fp, 1<<40, MaxWindowTicks, 1, EvictOnFull)
		}
	})
}

// A thousand keys per goroutine, as clients spread over a route.
func BenchmarkHitManyKeysParallel(b *testing.B) {
	tbl := newTable(b, 81919) // 10m
	var seq atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		base := seq.Add(1) << 32
		fps := make([]uint64, 1000)
		for i := range fps {
			h := tbl.KeyHash()
			var k [8]byte
			for j := range k {
				k[j] = byte((base + uint64(i)) >> (8 * j))
			}
			h.Write(k[:])
			fps[i] = h.Sum()
		}
		i := 0
		for pb.Next() {
			tbl.Hit(fps[i%len(fps)], 1<<40, MaxWindowTicks, 1, EvictOnFull)
			i++
		}
	})
}
