package accesslog

import (
	"encoding/base64"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
)

// benchEntry is a typical proxied request with every field the formats read, including
// a Basic credential and bytes that need escaping, so no formatting path is skipped.
func benchEntry(tb testing.TB) *Entry {
	raw := "GET /api/v1/users/42?fields=name,email&limit=10 HTTP/1.1\r\n" +
		"Host: api.example.com\r\n" +
		"Referer: https://app.example.com/dashboard?tab=\"users\"\r\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36\r\n" +
		"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("service-account:s3cret")) + "\r\n\r\n"
	ctx := newCtx(tb, raw, nil, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString(`{"id":42,"name":"Ada","email":"ada@example.com"}`)
	})
	return &Entry{
		Ctx:           ctx,
		RemoteAddr:    []byte("203.0.113.77"),
		StartNanos:    time.Now().UnixNano() - 1_500_000,
		UpstreamAddr:  []byte("10.0.3.14:8080"),
		UpstreamNanos: 1_200_000,
		RouteID:       "users-api",
	}
}

func TestLogDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, format := range []string{"combined", "json"} {
		for _, buffer := range []int{0, 1024, 64 << 10} {
			path := filepath.Join(t.TempDir(), "access.log")
			l := openFileLogger(t, conf.AccessLog{Format: format, Buffer: buffer, FlushInterval: time.Hour}, path)
			e := benchEntry(t)
			// 1000 lines overflow the small buffers many times, so flushes are counted too.
			if n := testing.AllocsPerRun(1000, func() { l.Log(e) }); n != 0 {
				t.Errorf("%s with a %d-byte buffer: %v allocations per Log, want 0", format, buffer, n)
			}
		}
	}
}

func benchmarkLog(b *testing.B, cfg conf.AccessLog) {
	cfg.Enabled = true
	l, err := Open(cfg, filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var lineBytes atomic.Int64
	{
		e := benchEntry(b)
		ln := appendCombined(nil, e, newStamp(time.Now()))
		if cfg.Format == "json" {
			ln = appendJSON(nil, e, time.Now().UnixNano(), newStamp(time.Now()))
		}
		lineBytes.Store(int64(len(ln)))
	}
	b.ReportAllocs()
	b.SetBytes(lineBytes.Load())
	b.RunParallel(func(pb *testing.PB) {
		e := benchEntry(b) // fasthttp contexts belong to one goroutine
		for pb.Next() {
			l.Log(e)
		}
	})
}

func BenchmarkLogCombined(b *testing.B) {
	benchmarkLog(b, conf.AccessLog{Format: "combined", Buffer: 64 << 10, FlushInterval: time.Second})
}

func BenchmarkLogJSON(b *testing.B) {
	benchmarkLog(b, conf.AccessLog{Format: "json", Buffer: 64 << 10, FlushInterval: time.Second})
}

// BenchmarkLogCombinedUnbuffered shows what the buffer saves: one write(2) per line.
func BenchmarkLogCombinedUnbuffered(b *testing.B) {
	benchmarkLog(b, conf.AccessLog{Format: "combined", Buffer: 0})
}

// BenchmarkFormat measures building the line alone, without the lock and the write.
func BenchmarkFormat(b *testing.B) {
	e := benchEntry(b)
	st := newStamp(time.Now())
	line := make([]byte, 0, 1024)
	b.Run("combined", func(b *testing.B) {
		for b.Loop() {
			line = appendCombined(line[:0], e, st)
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			line = appendJSON(line[:0], e, e.StartNanos+1_500_000, st)
		}
	})
}
