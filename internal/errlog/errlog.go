// Package errlog writes nginx-style error-log lines shared by the master and its workers:
// time, [level], pid#who, message. One line per event, so a reader can grep by pid or slot.
package errlog

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Level orders messages; lines below the logger's level are dropped.
type Level int32

// The levels, as error_log_level names them.
const (
	Debug Level = iota
	Info
	Warn
	Error
)

// ParseLevel maps error_log_level's words to a Level; anything else is Warn, the default.
func ParseLevel(s string) Level {
	switch s {
	case "debug":
		return Debug
	case "info":
		return Info
	case "error":
		return Error
	}
	return Warn
}

// Logger is safe for concurrent use.
type Logger struct {
	mu    sync.Mutex
	out   io.Writer
	who   string
	level atomic.Int32
}

// New returns a Logger that writes to out and names itself who (e.g. "master", "slot 1").
func New(out io.Writer, who string) *Logger {
	l := &Logger{out: out, who: who}
	l.level.Store(int32(Info))
	return l
}

// SetLevel drops lines below level from now on.
func (l *Logger) SetLevel(level Level) { l.level.Store(int32(level)) }

func (l *Logger) printf(level Level, name, format string, args ...any) {
	if int32(level) < l.level.Load() {
		return
	}
	line := fmt.Sprintf("%s [%s] %d#%s: %s\n", time.Now().Format("2006/01/02 15:04:05"), name,
		os.Getpid(), l.who, fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.out, line)
}

// Debugf logs detail for debugging.
func (l *Logger) Debugf(format string, args ...any) { l.printf(Debug, "debug", format, args...) }

// Infof logs lifecycle events (nginx's notice).
func (l *Logger) Infof(format string, args ...any) { l.printf(Info, "notice", format, args...) }

// Warnf logs something odd that the gateway survived.
func (l *Logger) Warnf(format string, args ...any) { l.printf(Warn, "warn", format, args...) }

// Errorf logs a failure.
func (l *Logger) Errorf(format string, args ...any) { l.printf(Error, "error", format, args...) }

// File is an append-only log file that can be reopened in place (logrotate renames the
// file, then USR1 makes every holder open the path again).
type File struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// OpenFile opens path for appending, creating it 0600.
func OpenFile(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log %s: %w", path, err)
	}
	return &File{path: path, f: f}, nil
}

// Write appends p.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Write(p)
}

// Current is the open file, for handing to a child process as its stdout and stderr.
func (f *File) Current() *os.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f
}

// Reopen opens the path again and closes the old file.
func (f *File) Reopen() error {
	nf, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("reopening log %s: %w", f.path, err)
	}
	f.mu.Lock()
	old := f.f
	f.f = nf
	f.mu.Unlock()
	return old.Close()
}

// Close closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Close()
}
