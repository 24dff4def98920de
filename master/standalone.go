package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"gw/conf"
	"gw/master/standalone"
	"gw/master/store"
)

// fileState is what a master on config_provider yaml or json adds: the standalone file
// it reads every second (see master/standalone/doc.go). The store is a store.Remote whose
// writes are all refused; only the file's poller changes it.
type fileState struct {
	path   string
	format string
	every  time.Duration
	stop   context.CancelFunc
	done   chan struct{}

	// last is the content read last, applied or not (the poller's alone).
	last []byte

	// Guarded by Master.mu: when the store last took the file, and why the file on disk
	// is not what is served ("" when it is).
	loaded  time.Time
	problem string
}

// errConfigFromFile is what a write to a store over a standalone file gets.
var errConfigFromFile = errors.New("the config comes from the standalone file (deployment.config_provider yaml or json): change the file; the Admin API only reads")

// fileRemote is the store.Remote of a standalone file: it takes no writes.
type fileRemote struct{}

func (fileRemote) Put(context.Context, store.Kind, string, []byte, uint64) (uint64, bool, error) {
	return 0, false, errConfigFromFile
}
func (fileRemote) Delete(context.Context, store.Kind, string) (uint64, bool, error) {
	return 0, false, errConfigFromFile
}
func (fileRemote) NewID(context.Context) (string, error) { return "", errConfigFromFile }
func (fileRemote) Close() error                          { return nil }

// openFileStore opens the store over the standalone file and reads the file once. A file
// that is missing, unfinished (no #END) or wrong does not stop the start: the node
// serves no objects, says why, and takes the file once it is right.
func (m *Master) openFileStore(cfg *conf.Config) error {
	// data_dir holds nothing of the file's, but the instance keeps its other files there.
	dir := m.paths.DataDir(cfg.DataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating data_dir %s: %w", dir, err)
	}
	var err error
	if m.store, err = store.OpenRemote(fileRemote{}, time.Second, nil, 0); err != nil {
		return err
	}
	m.file = &fileState{
		path:   filepath.Join(filepath.Dir(m.paths.Config), cfg.Deployment.StandaloneFile()),
		format: cfg.Deployment.ConfigProvider,
		every:  time.Second,
	}
	m.readFile(false)
	return nil
}

// startFileSync starts the poller, once the workers serve the start's snapshot.
func (m *Master) startFileSync() {
	f := m.file
	if f == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	f.stop, f.done = stop, make(chan struct{})
	go func() {
		defer close(f.done)
		t := time.NewTicker(f.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.readFile(true)
			}
		}
	}()
}

func (m *Master) stopFileSync() {
	if f := m.file; f != nil && f.stop != nil {
		f.stop()
		<-f.done
	}
}

// readFile reads the file and, when it changed and parses, makes the store hold exactly
// its objects; publish hands what changed to the workers (false at the start, when the
// first snapshot is built from the store). Objects the file holds unchanged keep their
// indexes, so only what changed reaches the workers.
func (m *Master) readFile(publish bool) {
	f := m.file
	data, err := os.ReadFile(f.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = errors.New("the file does not exist")
		}
		if f.last != nil || !publish {
			m.fileProblem(fmt.Sprintf("%s: %v", f.path, err))
		}
		f.last = nil
		return
	}
	if f.last != nil && bytes.Equal(data, f.last) {
		return
	}
	f.last = data
	objects, err := standalone.Parse(data, f.format)
	if err != nil {
		m.fileProblem(fmt.Sprintf("%s: %v", f.path, err))
		return
	}
	revision := m.store.Revision() + 1
	applied := make([]store.Applied, len(objects))
	for i, o := range objects {
		a := store.Applied{Kind: o.Kind, ID: o.ID, Value: o.Value, CreatedIndex: revision, ModifiedIndex: revision}
		if prev, ok := m.store.Get(o.Kind, o.ID); ok {
			a.CreatedIndex = prev.CreatedIndex
			if bytes.Equal(prev.Value, o.Value) {
				a.ModifiedIndex = prev.ModifiedIndex
			}
		}
		applied[i] = a
	}
	changes := m.store.Replace(applied, revision)
	if publish && len(changes) > 0 {
		d := m.remoteDelta(changes, revision, f.path, m.fixAdvice())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := m.Publish(ctx, d); err != nil {
			m.log.Errorf("%s: %v", f.path, err)
		}
		cancel()
	}
	m.mu.Lock()
	had := f.problem
	f.loaded, f.problem = time.Now(), ""
	m.mu.Unlock()
	if publish || had != "" {
		m.log.Infof("%s: serving its %d objects (%d changed)", f.path, len(objects), len(changes))
	}
}

// fileProblem records why the file on disk is not served, in the error log and for
// gwctl status; the last config the file gave keeps serving.
func (m *Master) fileProblem(problem string) {
	m.mu.Lock()
	m.file.problem = problem
	loaded := m.file.loaded
	m.mu.Unlock()
	if loaded.IsZero() {
		m.log.Errorf("%s; serving no objects until it is fixed", problem)
		return
	}
	m.log.Errorf("%s; still serving what the file held at %s", problem, loaded.UTC().Format(time.RFC3339))
}

// StandaloneFacts is a node on a standalone file: which file, when it was last taken and
// why the file now on disk is not served, if it is not.
type StandaloneFacts struct {
	Path    string
	Loaded  time.Time
	Problem string `json:",omitempty"`
}
