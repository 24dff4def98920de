package filelogger

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"gw/plugins"
	"gw/plugins/batch"
	"gw/plugins/logentry"
)

var _ plugins.LogPhase = (*logentry.Logger)(nil)

// Build makes the route's instance, a logentry.Logger whose processor appends to the
// file.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	format, err := logentry.FormatFor(cfg.Format, env)
	if err != nil {
		return nil, fmt.Errorf("plugin_metadata: %w", err)
	}
	l := &logentry.Logger{Format: format}
	opts, path := cfg.Entry, cfg.Path
	var logf func(string, ...any)
	if env.Shared != nil {
		opts.Version, logf = env.Shared.Version, env.Shared.Logf
		if !filepath.IsAbs(path) && env.Shared.Prefix != "" {
			path = filepath.Join(env.Shared.Prefix, path)
		}
	}
	if format == nil {
		l.Default = logentry.NewDefault(opts, env.Route)
	}
	w := &writer{path: path}
	l.Proc = batch.New(batchConfig, w.write, batch.CountersOf(env.Shared, Name), logf)
	return l, nil
}

// writer appends batches to the file, opening it for each: a file renamed away (log
// rotation) is created again by the next batch.
type writer struct {
	path string
	data []byte
}

func (w *writer) write(entries [][]byte) error {
	w.data = w.data[:0]
	for _, e := range entries {
		w.data = append(w.data, e...)
		w.data = append(w.data, '\n')
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open file: %s: %w", w.path, err)
	}
	_, err = f.Write(w.data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to write file: %s: %w", w.path, err)
	}
	return nil
}
