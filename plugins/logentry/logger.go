package logentry

import (
	"fmt"

	"gw/plugins"
	"gw/plugins/batch"
)

// Logger is the log phase every logger shares: the entry (Format's, else Default's)
// written straight into Proc's buffer. Log is safe for concurrent use and allocates
// nothing once warm.
type Logger struct {
	Format  *Format
	Default *Default
	Proc    *batch.Processor
	// Header, when set, writes what comes before each entry (syslog's RFC 5424 header),
	// and NewLine ends each entry with '\n'.
	Header  func(dst []byte, c *plugins.Ctx) []byte
	NewLine bool

	// scratch is Default's working memory, used under Proc's lock (Processor.AddWith).
	scratch Scratch
}

// Log adds the request's entry to the processor and returns.
func (l *Logger) Log(c *plugins.Ctx) {
	l.Proc.AddWith(func(dst []byte) []byte { return l.appendEntry(dst, c) })
}

func (l *Logger) appendEntry(dst []byte, c *plugins.Ctx) []byte {
	if l.Header != nil {
		dst = l.Header(dst, c)
	}
	if l.Format != nil {
		dst = l.Format.Append(dst, c)
	} else {
		dst = l.Default.Append(dst, c, &l.scratch)
	}
	if l.NewLine {
		dst = append(dst, '\n')
	}
	return dst
}

// NewLogger makes a route's logger: its log_format (own, else FormatFor's), the
// gateway's version and error log from env, and a processor of its own that delivers
// with send and counts its drops under plugin's name.
func NewLogger(own *Format, opts Options, cfg batch.Config, send batch.Send, plugin string, env *plugins.Env) (*Logger, error) {
	return newLogger(own, opts, plugin, env, func(counters batch.Counters, logf func(string, ...any)) *batch.Processor {
		return batch.New(cfg, send, counters, logf)
	})
}

// NewJoinedLogger is NewLogger with a processor that delivers each batch as one body,
// joined as j says (batch.NewJoined).
func NewJoinedLogger(own *Format, opts Options, cfg batch.Config, j batch.Joined, send batch.SendJoined, plugin string, env *plugins.Env) (*Logger, error) {
	return newLogger(own, opts, plugin, env, func(counters batch.Counters, logf func(string, ...any)) *batch.Processor {
		return batch.NewJoined(cfg, j, send, counters, logf)
	})
}

func newLogger(own *Format, opts Options, plugin string, env *plugins.Env, processor func(batch.Counters, func(string, ...any)) *batch.Processor) (*Logger, error) {
	format, err := FormatFor(own, env)
	if err != nil {
		return nil, fmt.Errorf("plugin_metadata: %w", err)
	}
	l := &Logger{Format: format}
	var logf func(string, ...any)
	var shared *plugins.Shared
	var route *plugins.RouteInfo
	if env != nil {
		shared, route = env.Shared, env.Route
	}
	if shared != nil {
		opts.Version, logf = shared.Version, shared.Logf
	}
	if format == nil {
		l.Default = NewDefault(opts, route)
	}
	l.Proc = processor(batch.CountersOf(shared, plugin), logf)
	return l, nil
}

// FormatFor is the log_format a route's logger uses: its own, else its plugin_metadata's
// (env.Metadata, DefaultFormat when that has none), else nil for the default entry.
func FormatFor(own *Format, env *plugins.Env) (*Format, error) {
	if own != nil || env == nil || env.Metadata == nil {
		return own, nil
	}
	md, err := ParseMetadata(env.Metadata)
	if err != nil {
		return nil, err
	}
	return md.Format, nil
}

// Concat joins a batch as APISIX's tcp-logger and udp-logger do: with batch_max_size 1
// the entry itself, otherwise a JSON array of the entries.
func Concat(dst []byte, entries [][]byte, batchMaxSize int) []byte {
	if batchMaxSize == 1 && len(entries) == 1 {
		return append(dst, entries[0]...)
	}
	dst = append(dst, '[')
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}
