package accesslog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/internal/monotime"
)

// ErrClosed is returned by Reopen and Flush after Close.
var ErrClosed = errors.New("accesslog: closed")

// defaultFlushInterval bounds how long a buffered line waits when the config gives none.
const defaultFlushInterval = time.Second

// maxKeptLine keeps a freak multi-kilobyte line from pinning a large scratch buffer
// forever.
const maxKeptLine = 16 << 10

// Logger appends one line per request to a file shared with the other workers. Its
// methods are safe for concurrent use. A nil *Logger (what Open returns when the access
// log is disabled) accepts every call and does nothing.
type Logger struct {
	path string
	json bool
	open func(path string) (io.WriteCloser, error)
	now  func() time.Time

	// second caches the formatted time of the current second.
	second atomic.Pointer[stamp]

	mu     sync.Mutex
	line   []byte         // guarded by mu; scratch in which Log formats a line
	out    io.WriteCloser // guarded by mu
	buf    []byte         // guarded by mu; cap is the configured buffer, 0 when unbuffered
	err    error          // guarded by mu; the first write error since the last Flush
	closed bool           // guarded by mu

	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

// Open opens (creating if needed) the access log at path, which the caller has already
// resolved against the prefix, for appending. It returns nil and no error when cfg is
// disabled. With a buffer it starts a goroutine that flushes every cfg.FlushInterval
// (1s when unset); Close stops it.
func Open(cfg conf.AccessLog, path string) (*Logger, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	return open(cfg, path, openFile)
}

// openFile opens the log as an os.File, whose writes go through the runtime's system call
// bookkeeping, unlike the sockets' (internal/rawio). rawio's rule is that a raw call is
// made only on a descriptor that cannot block, and a regular file can: dirty-page
// throttling, a full journal, a network filesystem or a dying disk stall write(2) for as
// long as they last, and O_NONBLOCK does not apply to files (nor, on ext4, RWF_NOWAIT). A
// raw write holds the worker's only processor (P) for the whole stall: the runtime's
// monitor can take back only a P whose goroutine is marked as in a system call, and a raw
// call is not marked. No goroutine would run, not the IPC one that acknowledges the
// master's snapshots or notices that the master died, nor the timers that end a drain;
// and in a process with more than one P (tests, or a worker someone starts with
// GOMAXPROCS above 1), the garbage collector's stop-the-world would stop every other P and
// then wait on that one until the disk came back. Through os.File the stalled thread
// gives its P up, the monitor hands it to another thread, and the worker goes on; requests
// still wait for the Logger's lock to log, as an nginx worker waits for its write.
//
// What it costs: a 64 KiB flush can outlast the monitor's 20 µs period, and a write seen
// in two of its ticks is taken over, which keeps the monitor at that period. With the
// runtime overlay (tools/runtime-overlay.sh) the monitor otherwise runs at 10 ms under
// load, and a worker flushes every few milliseconds at most, so that rarely happens:
// under 16 connections a worker made 2.6 monitor sleeps and 3.0 futex calls per 1000
// requests this way against 0.8 and 0.9 with raw writes, and the same CPU per request.
func openFile(path string) (io.WriteCloser, error) {
	// O_APPEND makes every write(2) land whole at the end of the file even with several
	// worker processes writing to it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("accesslog: %w", err)
	}
	return f, nil
}

// monotimeNow is the Logger's clock: monotime.Unix, as the request's start
// (Entry.StartNanos) and Entry.Now are, so that request_time never mixes two clocks; one
// clock read instead of time.Now's two.
func monotimeNow() time.Time { return time.Unix(0, monotime.Unix(monotime.Now())) }

func open(cfg conf.AccessLog, path string, openSink func(string) (io.WriteCloser, error)) (*Logger, error) {
	var json bool
	switch cfg.Format {
	case "", "combined":
	case "json":
		json = true
	default:
		return nil, fmt.Errorf("accesslog: format must be one of combined, json, got %q", cfg.Format)
	}
	if cfg.Buffer < 0 {
		return nil, fmt.Errorf("accesslog: buffer must be >= 0, got %d", cfg.Buffer)
	}
	out, err := openSink(path)
	if err != nil {
		return nil, err
	}
	l := &Logger{
		path: path,
		json: json,
		open: openSink,
		now:  monotimeNow,
		out:  out,
		buf:  make([]byte, 0, cfg.Buffer),
		line: make([]byte, 0, 1024),
	}
	if cfg.Buffer > 0 {
		interval := cfg.FlushInterval
		if interval <= 0 {
			interval = defaultFlushInterval
		}
		l.stop = make(chan struct{})
		l.stopped = make(chan struct{})
		go l.flushEvery(interval)
	}
	return l, nil
}

// Log formats e and appends it to the buffer, writing the buffer first when the line
// does not fit. It does not allocate. The line is formatted under the lock, in the
// Logger's one scratch buffer: a worker runs on one processor, so the lock is all but
// never contended, and a pool would cost more than it saves.
func (l *Logger) Log(e *Entry) {
	if l == nil {
		return
	}
	var t time.Time
	now := e.Now
	if now == 0 {
		t = l.now()
		now = t.UnixNano()
	}
	st := l.second.Load()
	if st == nil || st.unix != now/int64(time.Second) {
		if t.IsZero() {
			t = time.Unix(0, now) // in time.Local, as time.Now's
		}
		// One allocation a second, shared by every line of that second.
		st = newStamp(t)
		l.second.Store(st)
	}
	l.mu.Lock()
	if l.json {
		l.line = appendJSON(l.line[:0], e, now, st)
	} else {
		l.line = appendCombined(l.line[:0], e, st)
	}
	l.appendLocked(l.line)
	if cap(l.line) > maxKeptLine {
		l.line = make([]byte, 0, 1024)
	}
	l.mu.Unlock()
}

// appendLocked adds one whole line to the buffer. A line that would overflow the buffer
// flushes it first, and a line larger than the buffer (every line when unbuffered) is
// written on its own, so no write(2) ever carries part of a line.
func (l *Logger) appendLocked(p []byte) {
	if l.closed {
		return
	}
	if len(l.buf)+len(p) > cap(l.buf) {
		l.flushLocked()
	}
	if len(p) > cap(l.buf) {
		l.writeLocked(p)
		return
	}
	l.buf = append(l.buf, p...)
}

func (l *Logger) flushLocked() {
	if len(l.buf) == 0 {
		return
	}
	l.writeLocked(l.buf)
	// On a failed write the lines are dropped: holding them would only grow the backlog
	// of a disk that is full or gone. The error surfaces at the next Flush.
	l.buf = l.buf[:0]
}

func (l *Logger) writeLocked(p []byte) {
	if _, err := l.out.Write(p); err != nil && l.err == nil {
		l.err = fmt.Errorf("accesslog: writing %s: %w", l.path, err)
	}
}

// takeErrLocked returns the pending write error and clears it.
func (l *Logger) takeErrLocked() error {
	err := l.err
	l.err = nil
	return err
}

func (l *Logger) flushEvery(interval time.Duration) {
	defer close(l.stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.mu.Lock()
			if !l.closed {
				l.flushLocked()
			}
			l.mu.Unlock()
		case <-l.stop:
			return
		}
	}
}

// Flush writes the buffered lines and returns the first write error since the last
// Flush (including errors of the background flushes), if any.
func (l *Logger) Flush() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.flushLocked()
	return l.takeErrLocked()
}

// Reopen opens the path again and switches to it, for log rotation on USR1: the old
// file receives every line logged before the switch, the new one every line after. If
// the path cannot be opened the old file stays in use and the error is returned.
func (l *Logger) Reopen() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed // without creating the file again
	}
	next, err := l.open(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		next.Close()
		return ErrClosed
	}
	l.flushLocked()
	prev := l.out
	l.out = next
	err = l.takeErrLocked()
	l.mu.Unlock()
	if cerr := prev.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("accesslog: closing the previous %s: %w", l.path, cerr)
	}
	return err
}

// Close stops the flusher, writes the buffered lines and closes the file. Lines logged
// after Close are dropped.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.stopOnce.Do(func() {
		if l.stop != nil {
			close(l.stop)
			<-l.stopped
		}
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	l.flushLocked()
	err := l.takeErrLocked()
	if cerr := l.out.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("accesslog: closing %s: %w", l.path, cerr)
	}
	return err
}
