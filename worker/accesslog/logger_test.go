package accesslog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
)

// tagger builds the entries of one writer: each line names the writer and a sequence
// number in its URI, padded by a query of varying length. Its context is reused between
// lines, as the server reuses one per connection.
type tagger struct {
	name string
	e    Entry
}

func newTagger(t testing.TB, name string) *tagger {
	ctx := newCtx(t, "GET / HTTP/1.1\r\nHost: gw\r\nUser-Agent: load\r\n\r\n", nil,
		func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
	return &tagger{name: name, e: Entry{Ctx: ctx, RemoteAddr: []byte("198.51.100.1"), UpstreamNanos: -1}}
}

func (tg *tagger) entry(seq, pad int) *Entry {
	tg.e.Ctx.Request.Header.SetRequestURI(fmt.Sprintf("/%s/%d?pad=%s", tg.name, seq, strings.Repeat("p", pad)))
	tg.e.StartNanos = time.Now().UnixNano()
	return &tg.e
}

// taggedEntry is one tagger's entry, for tests that log from a single goroutine.
func taggedEntry(t testing.TB, name string, seq, pad int) *Entry {
	return newTagger(t, name).entry(seq, pad)
}

var combinedLine = regexp.MustCompile(
	`^198\.51\.100\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /(\w+)/(\d+)\?pad=p* HTTP/1\.1" 200 2 "-" "load"$`)

// checkWholeLines asserts that text is exactly the lines written by the given writers,
// each with seqs 0..perWriter-1, every one whole and present once, and returns the
// writers' lines in file order.
func checkWholeLines(t *testing.T, text string, writers []string, perWriter int) map[string][]int {
	t.Helper()
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Fatalf("file ends inside a line: %q", text[max(0, len(text)-80):])
	}
	order := map[string][]int{}
	seen := map[string]bool{}
	for _, ln := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if ln == "" && text == "" {
			break
		}
		m := combinedLine.FindStringSubmatch(ln)
		if m == nil {
			t.Fatalf("torn or foreign line: %q", ln)
		}
		key := m[1] + "/" + m[2]
		if seen[key] {
			t.Fatalf("line %s written twice", key)
		}
		seen[key] = true
		var seq int
		fmt.Sscan(m[2], &seq)
		order[m[1]] = append(order[m[1]], seq)
	}
	for _, w := range writers {
		if len(order[w]) != perWriter {
			t.Fatalf("writer %s has %d lines, want %d", w, len(order[w]), perWriter)
		}
	}
	if len(seen) != len(writers)*perWriter {
		t.Fatalf("%d lines, want %d", len(seen), len(writers)*perWriter)
	}
	return order
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func openFileLogger(t *testing.T, cfg conf.AccessLog, path string) *Logger {
	t.Helper()
	cfg.Enabled = true
	l, err := Open(cfg, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		cfg     conf.AccessLog
		path    string
		wantErr string
	}{
		{"combined", conf.AccessLog{Enabled: true, Format: "combined", Buffer: 64 << 10, FlushInterval: time.Second}, "a.log", ""},
		{"json unbuffered", conf.AccessLog{Enabled: true, Format: "json"}, "b.log", ""},
		{"format defaults to combined", conf.AccessLog{Enabled: true, Buffer: 10}, "c.log", ""},
		{"unknown format", conf.AccessLog{Enabled: true, Format: "main"}, "d.log", `format must be one of combined, json, got "main"`},
		{"negative buffer", conf.AccessLog{Enabled: true, Buffer: -1}, "e.log", "buffer must be >= 0, got -1"},
		{"missing directory", conf.AccessLog{Enabled: true}, "no/such/dir/f.log", "no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(tc.cfg, filepath.Join(dir, tc.path))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Open error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || l == nil {
				t.Fatalf("Open = %v, %v", l, err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.path)); err != nil {
				t.Fatalf("Open did not create the file: %v", err)
			}
		})
	}
}

func TestDisabledLoggerIsNil(t *testing.T) {
	path := filepath.Join(t.TempDir(), "off.log")
	l, err := Open(conf.AccessLog{Enabled: false, Format: "combined", Buffer: 0}, path)
	if l != nil || err != nil {
		t.Fatalf("Open of a disabled log = %v, %v; want nil, nil", l, err)
	}
	l.Log(taggedEntry(t, "w", 0, 0))
	if err := errors.Join(l.Flush(), l.Reopen(), l.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a disabled log touched %s: %v", path, err)
	}
}

func TestUnbufferedWritesAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l := openFileLogger(t, conf.AccessLog{Buffer: 0, FlushInterval: time.Hour}, path)
	for i := range 3 {
		l.Log(taggedEntry(t, "w", i, i))
		checkWholeLines(t, readFile(t, path), []string{"w"}, i+1)
	}
}

func TestBufferHoldsLinesUntilFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l := openFileLogger(t, conf.AccessLog{Buffer: 64 << 10, FlushInterval: time.Hour}, path)
	l.Log(taggedEntry(t, "w", 0, 0))
	if got := readFile(t, path); got != "" {
		t.Fatalf("buffered line written before a flush: %q", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkWholeLines(t, readFile(t, path), []string{"w"}, 1)
}

func TestFlushIntervalBoundsTheWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l := openFileLogger(t, conf.AccessLog{Buffer: 64 << 10, FlushInterval: 20 * time.Millisecond}, path)
	for round := range 2 {
		l.Log(taggedEntry(t, "w", round, 0))
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(readFile(t, path), "\n") != round+1 {
			if time.Now().After(deadline) {
				t.Fatalf("line %d not flushed 5s after Log with a 20ms flush interval", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	checkWholeLines(t, readFile(t, path), []string{"w"}, 2)
}

// TestEveryWriteIsWholeLines watches write(2) boundaries: a full buffer goes out in one
// write, no write splits a line, and a line bigger than the buffer goes out alone.
func TestEveryWriteIsWholeLines(t *testing.T) {
	const bufSize, writers, perWriter = 600, 8, 100
	rec := &recorder{}
	l := openRecorded(t, conf.AccessLog{Enabled: true, Buffer: bufSize, FlushInterval: time.Hour}, rec)
	names := make([]string, writers)
	var wg sync.WaitGroup
	for w := range writers {
		names[w] = fmt.Sprintf("w%d", w)
		tg := newTagger(t, names[w])
		wg.Go(func() {
			for i := range perWriter {
				pad := (i * 37) % 200
				if i%25 == 0 {
					pad = 2 * bufSize // longer than the buffer
				}
				l.Log(tg.entry(i, pad))
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	writes := rec.all()
	for i, w := range writes {
		if !strings.HasSuffix(w, "\n") {
			t.Fatalf("write %d ends inside a line: %q", i, w)
		}
		if n := strings.Count(w, "\n"); len(w) > bufSize && n != 1 {
			t.Fatalf("write %d of %d bytes holds %d lines; only a single oversized line may exceed the %d-byte buffer", i, len(w), n, bufSize)
		}
	}
	// The buffer is written only when the next line does not fit, so most writes are
	// batches; one write per line would mean it is not buffering at all.
	if lines := writers * perWriter; len(writes) > lines/2 {
		t.Fatalf("%d writes for %d lines; the buffer is not batching", len(writes), lines)
	}
	if !rec.closed {
		t.Fatal("Close did not close the file")
	}
	checkWholeLines(t, strings.Join(writes, ""), names, perWriter)
}

func TestConcurrentLogKeepsLinesWhole(t *testing.T) {
	const writers, perWriter = 32, 200
	path := filepath.Join(t.TempDir(), "access.log")
	l := openFileLogger(t, conf.AccessLog{Buffer: 4096, FlushInterval: 5 * time.Millisecond}, path)
	names := make([]string, writers)
	var wg sync.WaitGroup
	for w := range writers {
		names[w] = fmt.Sprintf("g%d", w)
		tg := newTagger(t, names[w])
		wg.Go(func() {
			for i := range perWriter {
				l.Log(tg.entry(i, i%300))
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	order := checkWholeLines(t, readFile(t, path), names, perWriter)
	for _, w := range names {
		for i, seq := range order[w] {
			if seq != i {
				t.Fatalf("writer %s's lines out of order: %v", w, order[w][:i+1])
			}
		}
	}
}

// TestTwoLoggersShareAFile stands in for two worker processes: each Logger has its own
// open file description on the same path, as separate processes do, so only O_APPEND and
// whole-line writes keep their lines apart.
func TestTwoLoggersShareAFile(t *testing.T) {
	const perWriter = 300
	path := filepath.Join(t.TempDir(), "access.log")
	loggers := []*Logger{
		openFileLogger(t, conf.AccessLog{Buffer: 1000, FlushInterval: 3 * time.Millisecond}, path),
		openFileLogger(t, conf.AccessLog{Buffer: 0}, path),
	}
	var names []string
	var wg sync.WaitGroup
	for p, l := range loggers {
		for g := range 4 {
			name := fmt.Sprintf("p%dg%d", p, g)
			names = append(names, name)
			tg := newTagger(t, name)
			wg.Go(func() {
				for i := range perWriter {
					l.Log(tg.entry(i, (i*53)%400))
				}
			})
		}
	}
	wg.Wait()
	for _, l := range loggers {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	checkWholeLines(t, readFile(t, path), names, perWriter)
}

func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	rotated := filepath.Join(dir, "access.log.1")
	l := openFileLogger(t, conf.AccessLog{Buffer: 64 << 10, FlushInterval: time.Hour}, path)
	before, after := newTagger(t, "before"), newTagger(t, "after")
	for i := range 100 {
		l.Log(before.entry(i, i))
	}
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		l.Log(after.entry(i, i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkWholeLines(t, readFile(t, rotated), []string{"before"}, 100)
	checkWholeLines(t, readFile(t, path), []string{"after"}, 100)
}

func TestReopenFailureKeepsTheOldFile(t *testing.T) {
	first := &recorder{}
	opens := 0
	l, err := open(conf.AccessLog{Enabled: true, Buffer: 0}, "x.log", func(string) (io.WriteCloser, error) {
		opens++
		if opens > 1 {
			return nil, errors.New("permission denied")
		}
		return first, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Reopen(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Reopen error %v, want the open failure", err)
	}
	l.Log(taggedEntry(t, "w", 0, 0))
	if first.closed || len(first.all()) != 1 {
		t.Fatalf("after a failed Reopen the old file got %d writes (closed %v); want 1 (open)", len(first.all()), first.closed)
	}
}

func TestWriteErrorSurfacesOnce(t *testing.T) {
	rec := &recorder{failWith: errors.New("no space left on device")}
	l := openRecorded(t, conf.AccessLog{Enabled: true, Buffer: 4096, FlushInterval: time.Hour}, rec)
	l.Log(taggedEntry(t, "w", 0, 0))
	if err := l.Flush(); err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Flush error %v, want the write failure", err)
	}
	rec.mu.Lock()
	rec.failWith = nil
	rec.mu.Unlock()
	if err := l.Flush(); err != nil {
		t.Fatalf("second Flush reported %v again", err)
	}
	l.Log(taggedEntry(t, "w", 1, 0))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := rec.all(); len(got) != 1 || !strings.Contains(got[0], "/w/1?") {
		t.Fatalf("after recovery the file got %q; want only line 1 (line 0 was dropped with the failed write)", got)
	}
}

func TestCloseFlushesAndStops(t *testing.T) {
	rec := &recorder{}
	l := openRecorded(t, conf.AccessLog{Enabled: true, Buffer: 4096, FlushInterval: time.Hour}, rec)
	l.Log(taggedEntry(t, "w", 0, 0))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rec.all()) != 1 || !rec.closed {
		t.Fatalf("Close left %d writes, closed %v; want the buffered line written and the file closed", len(rec.all()), rec.closed)
	}
	l.Log(taggedEntry(t, "w", 1, 0))
	for name, err := range map[string]error{"Flush": l.Flush(), "Reopen": l.Reopen(), "Close": l.Close()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if len(rec.all()) != 1 {
		t.Fatalf("a line logged after Close was written: %q", rec.all())
	}
}

// An entry that brings its own clock reading (Entry.Now) is logged at that time, and
// the Logger reads no clock for it.
func TestEntryNowSparesTheClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l := openFileLogger(t, conf.AccessLog{Buffer: 0, FlushInterval: time.Hour}, path)
	l.now = func() time.Time {
		t.Fatal("Log read the clock although the entry carried the time")
		return time.Time{}
	}
	e := taggedEntry(t, "w", 0, 0)
	at := time.Date(2026, 3, 1, 1, 35, 9, 0, time.Local)
	e.Now = at.UnixNano()
	l.Log(e)
	want := at.Format("[02/Jan/2006:15:04:05 -0700]")
	if got := readFile(t, path); !strings.Contains(got, want) {
		t.Fatalf("logged %q, want the entry's time %s", got, want)
	}
}

// A failing write of the log file reports the errno and the path.
func TestFileReportsWriteErrors(t *testing.T) {
	w, err := openFile("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer w.Close()
	n, err := w.Write([]byte("line\n"))
	var pe *os.PathError
	if n != 0 || !errors.As(err, &pe) || pe.Path != "/dev/full" || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write to /dev/full = %d, %v; want 0 and ENOSPC naming the path", n, err)
	}
}

// A log whose writes stall (here a named pipe that nobody reads, as a slow log shipper's
// would be) must not hold the worker's only processor: the worker's other goroutines
// keep running while the Logger waits. A write that held it would let nothing else run
// until the helper process starts draining the pipe, two seconds later, and leaves a mark.
func TestAStalledWriteLeavesTheProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	dir := t.TempDir()
	fifo, drained := filepath.Join(dir, "access.fifo"), filepath.Join(dir, "drained")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Our own read end, so that opening the log does not wait for a reader; nothing
	// reads it until the check is done.
	reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	drainer := exec.Command("sh", "-c", `sleep 2; : >"$1"; exec cat "$0" >/dev/null`, fifo, drained)
	if err := drainer.Start(); err != nil {
		t.Skipf("no sh to drain the pipe: %v", err)
	}
	defer func() {
		drainer.Process.Kill()
		drainer.Wait()
	}()
	l := openFileLogger(t, conf.AccessLog{Format: "combined"}, fifo)
	e := newTagger(t, "stall").entry(0, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 { // about 200 KiB, three times what the pipe holds
			l.Log(e)
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := os.Stat(drained); err == nil {
		t.Fatal("this goroutine ran again only once the helper began to drain the pipe: the stalled write held the processor")
	}
	// Drain the pipe ourselves, so that the Logger finishes without waiting for the helper.
	go io.Copy(io.Discard, reader)
	<-done
}
