package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"gw/conf"
)

// Remote is a store shared by several nodes that orders every change itself (etcd): it
// assigns the revisions, and a node learns of every change, its own included, by watching
// it. A Store over a Remote writes through it and waits until the change has come back
// through Apply, so that a write, once it returns, is in Get, List and Snapshot as with a
// local Backend. Its methods are called concurrently.
type Remote interface {
	// Put stores value under kind/id. ifModified, when not 0, makes it a compare-and-swap:
	// the write happens only if the object's modified revision is still ifModified, else
	// ErrConflict. It returns the revision of the write and whether the object is new.
	Put(ctx context.Context, kind Kind, id string, value []byte, ifModified uint64) (revision uint64, created bool, err error)
	// Delete removes kind/id; existed is false (and revision 0) when there was none.
	Delete(ctx context.Context, kind Kind, id string) (revision uint64, existed bool, err error)
	// NewID returns a fresh id for a POST.
	NewID(ctx context.Context) (string, error)
	Close() error
}

// ErrConflict is a compare-and-swap that lost: the object changed since it was read.
// The message is APISIX's.
var ErrConflict = errors.New("value changed before overwritten")

// Applied is one change that happened in a Remote, as Apply records it: Value nil deletes
// the object.
type Applied struct {
	Kind          Kind
	ID            string
	Value         json.RawMessage
	CreatedIndex  uint64
	ModifiedIndex uint64
}

// remoteState is what a Store over a Remote adds: the remote and the waiters for a
// revision to be applied.
type remoteState struct {
	remote  Remote
	timeout time.Duration

	mu      sync.Mutex
	applied chan struct{} // closed and replaced at every Apply
	closed  bool
}

// OpenRemote builds a Store over remote that holds objects at revision to begin with (a
// cached copy of the remote's content, or nothing). Writes wait at most writeTimeout for
// the remote and for their change to come back through Apply. Objects that do not decode
// are held and left out of snapshots, as Open does with stored ones.
func OpenRemote(remote Remote, writeTimeout time.Duration, objects []Object, revision uint64) (*Store, error) {
	s, err := OpenBackend(&memoryBackend{objects: objects, revision: revision})
	if err != nil {
		return nil, err
	}
	s.backend = nil
	s.remote = &remoteState{remote: remote, timeout: writeTimeout, applied: make(chan struct{})}
	return s, nil
}

// Remote reports whether the store writes through a Remote.
func (s *Store) Remote() bool { return s.remote != nil }

// Apply records changes read from the Remote, all at or below revision, which becomes the
// store's revision: readers see all of them or none. It returns the changes that made a
// difference, as SnapshotWith and conf.ChangeOf take them (a change already held, the
// echo of a write through this store when a re-list repeats it, is left out).
func (s *Store) Apply(changes []Applied, revision uint64) []Change {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	txn := s.db.Txn(true)
	defer txn.Abort()
	var made []Change
	for _, c := range changes {
		if !knownKind(c.Kind) {
			continue
		}
		prev, _ := txn.First(string(c.Kind), "id", c.ID)
		if c.Value == nil {
			if prev == nil {
				continue
			}
			if err := txn.Delete(string(c.Kind), prev); err != nil {
				panic(fmt.Sprintf("BUG: store: unindexing %s/%s: %v", c.Kind, c.ID, err))
			}
			made = append(made, Change{Kind: c.Kind, ID: c.ID})
			continue
		}
		if prev != nil && prev.(*row).ModifiedIndex == c.ModifiedIndex {
			continue
		}
		r := remoteRow(c)
		if prev != nil {
			// The created index is part of a unique index: the old row goes first.
			if err := txn.Delete(string(c.Kind), prev); err != nil {
				panic(fmt.Sprintf("BUG: store: unindexing %s/%s: %v", c.Kind, c.ID, err))
			}
		}
		for {
			// Two keys made by one etcd transaction share a create revision; the list
			// order needs distinct places, and between those two any order will do.
			if other, _ := txn.First(string(c.Kind), "created", r.Order); other == nil {
				break
			}
			r.Order++
		}
		if err := txn.Insert(string(c.Kind), r); err != nil {
			panic(fmt.Sprintf("BUG: store: indexing %s/%s: %v", c.Kind, c.ID, err))
		}
		made = append(made, Change{Kind: c.Kind, ID: c.ID, Value: r.Value})
	}
	if revision > revisionOf(txn) || len(made) > 0 {
		setRevision(txn, revision)
	}
	txn.Commit()
	s.remote.signal()
	return made
}

// Replace makes the store hold exactly objects at revision (a full list of the Remote,
// after a compaction or a reconnection) and returns the changes that made, as Apply does.
// The store's revision is revision even if that is lower (a Remote wiped and restarted).
func (s *Store) Replace(objects []Applied, revision uint64) []Change {
	listed := map[Kind]map[string]bool{}
	for _, o := range objects {
		if listed[o.Kind] == nil {
			listed[o.Kind] = map[string]bool{}
		}
		listed[o.Kind][o.ID] = true
	}
	var changes []Applied
	for _, kind := range Kinds() {
		for _, obj := range s.List(kind) {
			if !listed[kind][obj.ID] {
				changes = append(changes, Applied{Kind: kind, ID: obj.ID})
			}
		}
	}
	changes = append(changes, objects...)
	made := s.Apply(changes, revision)
	s.writeMu.Lock()
	txn := s.db.Txn(true)
	setRevision(txn, revision)
	txn.Commit()
	s.writeMu.Unlock()
	return made
}

// remoteRow is a row for c. A value that is not JSON cannot be shown as it is: it is held
// as a JSON string of its bytes, and left out.
func remoteRow(c Applied) *row {
	obj := Object{Kind: c.Kind, ID: c.ID, Value: c.Value, CreatedIndex: c.CreatedIndex, ModifiedIndex: c.ModifiedIndex}
	r := &row{Object: obj, Order: obj.CreatedIndex}
	if !json.Valid(c.Value) {
		r.Value = json.RawMessage(strconv.Quote(string(c.Value)))
	}
	r.decoded, r.decodeErr = DecodeRemote(c.Kind, c.ID, c.Value)
	return r
}

// DecodeRemote is Decode for a value read from a Remote under kind/id, which nothing
// checked before it was written there (etcdctl): it must be JSON, the id a valid one, and
// the object's own id (a consumer's username) the key's.
func DecodeRemote(kind Kind, id string, value []byte) (any, error) {
	if !json.Valid(value) {
		return nil, fmt.Errorf("%s/%s: the value in etcd is not JSON", kind, id)
	}
	if !ValidID(id) {
		return nil, fmt.Errorf("%s/%s: the key's id is not a valid id (1 to 64 characters of a-z A-Z 0-9 - _ .)", kind, id)
	}
	decoded, err := Decode(kind, id, value)
	if err != nil {
		return nil, err
	}
	var own string
	switch v := decoded.(type) {
	case *conf.Route:
		own = string(v.ID)
	case *conf.Upstream:
		own = string(v.ID)
	case *conf.Service:
		own = string(v.ID)
	case *conf.Consumer:
		own = v.Username
	case *conf.PluginConfig:
		own = string(v.ID)
	case *conf.GlobalRule:
		own = string(v.ID)
	case *conf.SSL:
		own = string(v.ID)
	case *conf.PluginMetadata:
		own = v.Name // the key's: the value holds no id
	}
	if own != id {
		return nil, fmt.Errorf("%s/%s: the value's id %q is not the key's %q", kind, id, own, id)
	}
	return decoded, nil
}

// WaitRevision blocks until the store has applied revision, ctx ends or the store closes.
func (s *Store) WaitRevision(ctx context.Context, revision uint64) error {
	if s.remote == nil {
		return nil
	}
	for {
		s.remote.mu.Lock()
		ch, closed := s.remote.applied, s.remote.closed
		s.remote.mu.Unlock()
		if s.Revision() >= revision {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("store: revision %d written but not yet seen back from etcd: %w", revision, ctx.Err())
		}
	}
}

func (r *remoteState) signal() {
	r.mu.Lock()
	close(r.applied)
	r.applied = make(chan struct{})
	r.mu.Unlock()
}

func (r *remoteState) closeWaiters() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.signal()
}

// writeContext bounds one write: the remote's answer and its change coming back.
func (s *Store) writeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.remote.timeout)
}

// PutIf is Put that stores value only if the object's ModifiedIndex is still
// modifiedIndex (a compare-and-swap, as APISIX's PATCH), else ErrConflict.
func (s *Store) PutIf(kind Kind, id string, value json.RawMessage, modifiedIndex uint64) (Object, error) {
	if s.remote != nil {
		obj, _, err := s.remotePut(kind, id, value, modifiedIndex)
		return obj, err
	}
	if prev, ok := s.Get(kind, id); !ok || prev.ModifiedIndex != modifiedIndex {
		return Object{}, ErrConflict
	}
	obj, _, err := s.Put(kind, id, value)
	return obj, err
}

func (s *Store) remotePut(kind Kind, id string, value []byte, ifModified uint64) (Object, bool, error) {
	ctx, cancel := s.writeContext()
	defer cancel()
	revision, created, err := s.remote.remote.Put(ctx, kind, id, value, ifModified)
	if err != nil {
		return Object{}, false, err
	}
	if err := s.WaitRevision(ctx, revision); err != nil {
		return Object{}, false, err
	}
	obj := Object{Kind: kind, ID: id, Value: value, CreatedIndex: revision, ModifiedIndex: revision}
	if now, ok := s.Get(kind, id); ok && now.ModifiedIndex == revision {
		obj = now
	}
	return obj, created, nil
}

// remotePutAll writes batch one object at a time: etcd bounds a transaction's size (128
// operations by default), so an import through etcd is not one change, and a failure
// part-way leaves the objects before it written. Callers order batch so that every
// prefix is consistent, as for PutAll on disk.
func (s *Store) remotePutAll(batch []Object) ([]Object, error) {
	out := make([]Object, 0, len(batch))
	for i, obj := range batch {
		stored, _, err := s.remotePut(obj.Kind, obj.ID, obj.Value, 0)
		if err != nil {
			return nil, fmt.Errorf("%s/%s (object %d of %d; the ones before it are stored): %w", obj.Kind, obj.ID, i+1, len(batch), err)
		}
		out = append(out, stored)
	}
	return out, nil
}

func (s *Store) remoteDelete(kind Kind, id string) (bool, error) {
	ctx, cancel := s.writeContext()
	defer cancel()
	revision, existed, err := s.remote.remote.Delete(ctx, kind, id)
	if err != nil || !existed {
		return false, err
	}
	return true, s.WaitRevision(ctx, revision)
}

func (s *Store) remoteNewID() (string, error) {
	ctx, cancel := s.writeContext()
	defer cancel()
	return s.remote.remote.NewID(ctx)
}
