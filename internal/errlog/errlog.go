// Package errlog writes nginx-style error-log lines shared by the master and its workers:
// time, [level], pid#who, message. One line per event, so a reader can grep by pid or slot.
package errlog

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Logger is safe for concurrent use.
type Logger struct {
	mu  sync.Mutex
	out io.Writer
	who string
}

// New returns a Logger that writes to out and names itself who (e.g. "master", "slot 1").
func New(out io.Writer, who string) *Logger { return &Logger{out: out, who: who} }

func (l *Logger) printf(level, format string, args ...any) {
	line := fmt.Sprintf("%s [%s] %d#%s: %s\n", time.Now().Format("2006/01/02 15:04:05"), level,
		os.Getpid(), l.who, fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.out, line)
}

// Infof logs at nginx's notice level: lifecycle events.
func (l *Logger) Infof(format string, args ...any) { l.printf("notice", format, args...) }

// Warnf logs something odd that the gateway survived.
func (l *Logger) Warnf(format string, args ...any) { l.printf("warn", format, args...) }

// Errorf logs a failure.
func (l *Logger) Errorf(format string, args ...any) { l.printf("error", format, args...) }
