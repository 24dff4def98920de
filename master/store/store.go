package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"gw/conf"

	"github.com/hashicorp/go-memdb"
)

// Kind names a collection of objects, as in the Admin API path ("routes").
type Kind string

// The kinds the store holds. Adding one is a new entry in kindSpecs.
const (
	Routes        Kind = "routes"
	Upstreams     Kind = "upstreams"
	Services      Kind = "services"
	Consumers     Kind = "consumers"
	PluginConfigs Kind = "plugin_configs"
	GlobalRules   Kind = "global_rules"
	SSLs          Kind = "ssls"
	// PluginMetadata's ids are plugins' names.
	PluginMetadata Kind = "plugin_metadata"
)

// Object is one stored object. Value is the JSON object as the Admin API stored it (with
// "id", "create_time" and "update_time"); Objects returned by the Store are shared and
// must not be modified.
type Object struct {
	Kind          Kind
	ID            string
	Value         json.RawMessage
	CreatedIndex  uint64
	ModifiedIndex uint64
}

// Errors the store returns; test with errors.Is.
var (
	ErrUnknownKind = errors.New("store: unknown kind")
	ErrInvalidID   = errors.New("store: invalid id")
	ErrClosed      = errors.New("store: closed")
)

// kindSpec ties a kind to the way its objects enter a conf.Snapshot: decode checks and
// decodes a stored value once, when it enters the store; add appends what decode made.
// decode gets the object's id too, for the kind whose value does not hold it
// (plugin_metadata, as in APISIX).
type kindSpec struct {
	kind   Kind
	decode func(id string, value []byte) (any, error)
	add    func(snap *conf.Snapshot, decoded any)
}

// Stored ssls passed conf.DecodeSSL; re-parsing every key on every load would cost a key
// parse per certificate, so they are decoded as stored.
var kindSpecs = []kindSpec{
	{Routes, decoder(conf.DecodeRoute), func(snap *conf.Snapshot, v any) { snap.Routes = append(snap.Routes, *v.(*conf.Route)) }},
	{Upstreams, decoder(conf.DecodeUpstream), func(snap *conf.Snapshot, v any) { snap.Upstreams = append(snap.Upstreams, *v.(*conf.Upstream)) }},
	{Services, decoder(conf.DecodeService), func(snap *conf.Snapshot, v any) { snap.Services = append(snap.Services, *v.(*conf.Service)) }},
	{Consumers, decoder(conf.DecodeConsumer), func(snap *conf.Snapshot, v any) { snap.Consumers = append(snap.Consumers, *v.(*conf.Consumer)) }},
	{PluginConfigs, decoder(conf.DecodePluginConfig), func(snap *conf.Snapshot, v any) {
		snap.PluginConfigs = append(snap.PluginConfigs, *v.(*conf.PluginConfig))
	}},
	{GlobalRules, decoder(conf.DecodeGlobalRule), func(snap *conf.Snapshot, v any) { snap.GlobalRules = append(snap.GlobalRules, *v.(*conf.GlobalRule)) }},
	{SSLs, decoder(conf.DecodeStoredSSL), func(snap *conf.Snapshot, v any) { snap.SSLs = append(snap.SSLs, *v.(*conf.SSL)) }},
	{PluginMetadata, func(id string, value []byte) (any, error) { return conf.DecodePluginMetadata(id, value) }, func(snap *conf.Snapshot, v any) {
		snap.PluginMetadata = append(snap.PluginMetadata, *v.(*conf.PluginMetadata))
	}},
}

func decoder[T any](decode func([]byte) (*T, error)) func(string, []byte) (any, error) {
	return func(_ string, value []byte) (any, error) {
		v, err := decode(value)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}

func specOf(kind Kind) *kindSpec {
	for i := range kindSpecs {
		if kindSpecs[i].kind == kind {
			return &kindSpecs[i]
		}
	}
	panic("BUG: store: no spec for kind " + string(kind))
}

// row is what the index holds for one object: the object and its value decoded once, as
// it entered the store, so that a snapshot decodes nothing. The decoded value is shared
// by every snapshot and must not be changed; decodeErr is why the value does not decode
// (a stored object this binary refuses, which snapshots leave out).
type row struct {
	Object
	// Order is the row's place in its kind's list, unique: the CreatedIndex, except where
	// an etcd transaction created two objects at one revision (remote.go).
	Order     uint64
	decoded   any
	decodeErr error
}

func newRow(obj Object) *row {
	r := &row{Object: obj, Order: obj.CreatedIndex}
	r.decoded, r.decodeErr = specOf(obj.Kind).decode(obj.ID, obj.Value)
	return r
}

// Kinds lists every kind the store holds, in snapshot order.
func Kinds() []Kind {
	kinds := make([]Kind, len(kindSpecs))
	for i, spec := range kindSpecs {
		kinds[i] = spec.kind
	}
	return kinds
}

func knownKind(kind Kind) bool {
	for _, spec := range kindSpecs {
		if spec.kind == kind {
			return true
		}
	}
	return false
}

// ValidID reports whether id may name an object: an id conf.ParseID accepts (1 to 64
// characters of [a-zA-Z0-9-_.], as APISIX's schema), but never "." or ".." since ids
// become file names.
func ValidID(id string) bool {
	_, err := conf.ParseID(id)
	return err == nil && id != "." && id != ".."
}

// revisionRow is the single row of the meta table; keeping the revision inside memdb
// lets a read transaction see objects and revision at the same point.
type revisionRow struct {
	Name     string
	Revision uint64
}

const (
	metaTable   = "meta"
	revisionKey = "revision"
)

func schema() *memdb.DBSchema {
	tables := map[string]*memdb.TableSchema{
		metaTable: {
			Name: metaTable,
			Indexes: map[string]*memdb.IndexSchema{
				"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"}},
			},
		},
	}
	for _, spec := range kindSpecs {
		name := string(spec.kind)
		tables[name] = &memdb.TableSchema{
			Name: name,
			Indexes: map[string]*memdb.IndexSchema{
				"id":      {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
				"created": {Name: "created", Unique: true, Indexer: &memdb.UintFieldIndex{Field: "Order"}},
			},
		}
	}
	return &memdb.DBSchema{Tables: tables}
}

// Backend persists objects for a Store. The Store calls it only under its writer lock, so
// an implementation sees one call at a time, and each call must be durable when it
// returns. The Store assigns every revision; a Backend only records them.
type Backend interface {
	// Load returns every persisted object of the given kinds and the persisted revision.
	Load(kinds []Kind) ([]Object, uint64, error)
	// Put creates or replaces obj; obj.ModifiedIndex is the new revision.
	Put(obj Object) error
	// Delete removes an object; revision is the new revision, which must survive it.
	Delete(kind Kind, id string, revision uint64) error
	// SetRevision records a revision consumed without an object change (NewID).
	SetRevision(revision uint64) error
	Close() error
}

// batchBackend is a Backend that persists many objects at once for less than one Put
// each (the directory backend: one flush). PutBatch returns how many objects it put in
// place; on an error those may need putting back.
type batchBackend interface {
	PutBatch(objs []Object) (int, error)
}

// Store is the master's object store: memdb in memory, a Backend on disk. Every method is
// safe for concurrent use; writes are serialised, reads run concurrently with them.
type Store struct {
	db      *memdb.MemDB
	backend Backend // nil for a store over a Remote
	remote  *remoteState

	writeMu sync.Mutex // serialises Put, Delete, NewID and Close
	closed  bool
}

// Open opens the file-backed store in dir, creating dir (0700) if it is missing, and
// loads every persisted object. See the package doc for the layout.
func Open(dir string) (*Store, error) {
	backend, err := openDirBackend(dir)
	if err != nil {
		return nil, err
	}
	s, err := OpenBackend(backend)
	if err != nil {
		backend.Close()
		return nil, err
	}
	return s, nil
}

// OpenBackend builds a Store over backend and loads everything it holds. The Store owns
// backend from here on and closes it in Close (not when OpenBackend fails).
func OpenBackend(backend Backend) (*Store, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("BUG: store: memdb schema: %w", err)
	}
	objects, revision, err := backend.Load(Kinds())
	if err != nil {
		return nil, err
	}
	txn := db.Txn(true)
	defer txn.Abort()
	for i := range objects {
		obj := objects[i]
		if !knownKind(obj.Kind) {
			return nil, fmt.Errorf("loading %s/%s: %w %q", obj.Kind, obj.ID, ErrUnknownKind, obj.Kind)
		}
		// memdb does not enforce uniqueness itself: a second object would silently
		// replace the first in the index.
		for _, index := range []struct {
			name string
			arg  any
		}{{"id", obj.ID}, {"created", obj.CreatedIndex}} {
			if other, _ := txn.First(string(obj.Kind), index.name, index.arg); other != nil {
				return nil, fmt.Errorf("loading %s/%s: %s %v is also used by %s/%s",
					obj.Kind, obj.ID, index.name, index.arg, obj.Kind, other.(*row).ID)
			}
		}
		if err := txn.Insert(string(obj.Kind), newRow(obj)); err != nil {
			return nil, fmt.Errorf("loading %s/%s: %w", obj.Kind, obj.ID, err)
		}
		revision = max(revision, obj.ModifiedIndex, obj.CreatedIndex)
	}
	if err := txn.Insert(metaTable, &revisionRow{Name: revisionKey, Revision: revision}); err != nil {
		return nil, fmt.Errorf("BUG: store: inserting revision: %w", err)
	}
	txn.Commit()
	return &Store{db: db, backend: backend}, nil
}

// Get returns the object of kind with id.
func (s *Store) Get(kind Kind, id string) (Object, bool) {
	if !knownKind(kind) {
		return Object{}, false
	}
	txn := s.db.Txn(false)
	raw, err := txn.First(string(kind), "id", id)
	if err != nil || raw == nil {
		return Object{}, false
	}
	return raw.(*row).Object, true
}

// List returns every object of kind, ordered by CreatedIndex.
func (s *Store) List(kind Kind) []Object {
	if !knownKind(kind) {
		return nil
	}
	return list(s.db.Txn(false), kind)
}

// All returns every object, kind by kind in Kinds order and each kind by CreatedIndex,
// with the revision they reflect: one consistent point, as for a backup.
func (s *Store) All() ([]Object, uint64) {
	txn := s.db.Txn(false)
	var objects []Object
	for _, kind := range Kinds() {
		objects = append(objects, list(txn, kind)...)
	}
	return objects, revisionOf(txn)
}

func list(txn *memdb.Txn, kind Kind) []Object {
	it, err := txn.Get(string(kind), "created")
	if err != nil {
		panic(fmt.Sprintf("BUG: store: listing %s: %v", kind, err))
	}
	var objects []Object
	for raw := it.Next(); raw != nil; raw = it.Next() {
		objects = append(objects, raw.(*row).Object)
	}
	return objects
}

// Revision returns the revision of the latest change.
func (s *Store) Revision() uint64 {
	return revisionOf(s.db.Txn(false))
}

func revisionOf(txn *memdb.Txn) uint64 {
	raw, err := txn.First(metaTable, "id", revisionKey)
	if err != nil || raw == nil {
		panic(fmt.Sprintf("BUG: store: revision row missing: %v", err))
	}
	return raw.(*revisionRow).Revision
}

// Put creates or replaces the object kind/id with value, a JSON object that the store
// copies. It reports whether the object is new. The change is durable when Put returns;
// if persisting fails, nothing changes.
func (s *Store) Put(kind Kind, id string, value json.RawMessage) (obj Object, created bool, err error) {
	if !knownKind(kind) {
		return Object{}, false, fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	if !ValidID(id) {
		return Object{}, false, fmt.Errorf("%w %q: use 1 to 64 characters of a-z A-Z 0-9 - _ .", ErrInvalidID, id)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, value); err != nil {
		return Object{}, false, fmt.Errorf("store: value of %s/%s is not JSON: %w", kind, id, err)
	}
	if s.remote != nil {
		return s.remotePut(kind, id, compact.Bytes(), 0)
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return Object{}, false, ErrClosed
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	revision := revisionOf(txn) + 1
	obj = Object{Kind: kind, ID: id, Value: compact.Bytes(), CreatedIndex: revision, ModifiedIndex: revision}
	created = true
	if prev, _ := txn.First(string(kind), "id", id); prev != nil {
		obj.CreatedIndex = prev.(*row).CreatedIndex
		created = false
	}
	if err := s.backend.Put(obj); err != nil {
		return Object{}, false, err
	}
	if err := txn.Insert(string(kind), newRow(obj)); err != nil {
		panic(fmt.Sprintf("BUG: store: indexing %s/%s: %v", kind, id, err))
	}
	setRevision(txn, revision)
	txn.Commit()
	return obj, created, nil
}

// PutAll creates or replaces every object of objs (Kind, ID and Value set; the indexes are
// assigned here) as one change: readers see all of them or none, and if persisting one
// fails, the ones already persisted are put back as they were and nothing changes in
// memory. Each object takes its own revision, in the order given. A crash part-way can
// leave a prefix of objs on disk, so callers order objs such that every prefix is a
// consistent store (what is referenced before what references it).
func (s *Store) PutAll(objs []Object) ([]Object, error) {
	batch := make([]Object, len(objs))
	seen := make(map[Kind]map[string]bool)
	for i, obj := range objs {
		if !knownKind(obj.Kind) {
			return nil, fmt.Errorf("%w %q", ErrUnknownKind, obj.Kind)
		}
		if !ValidID(obj.ID) {
			return nil, fmt.Errorf("%s: %w %q: use 1 to 64 characters of a-z A-Z 0-9 - _ .", obj.Kind, ErrInvalidID, obj.ID)
		}
		if seen[obj.Kind] == nil {
			seen[obj.Kind] = map[string]bool{}
		}
		if seen[obj.Kind][obj.ID] {
			return nil, fmt.Errorf("store: %s/%s appears twice in one batch", obj.Kind, obj.ID)
		}
		seen[obj.Kind][obj.ID] = true
		var compact bytes.Buffer
		if err := json.Compact(&compact, obj.Value); err != nil {
			return nil, fmt.Errorf("store: value of %s/%s is not JSON: %w", obj.Kind, obj.ID, err)
		}
		batch[i] = Object{Kind: obj.Kind, ID: obj.ID, Value: compact.Bytes()}
	}
	if s.remote != nil {
		return s.remotePutAll(batch)
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	revision := revisionOf(txn)
	var previous []*Object // what each persisted object replaced, nil when it was new
	for i := range batch {
		revision++
		obj := &batch[i]
		obj.CreatedIndex, obj.ModifiedIndex = revision, revision
		var prev *Object
		if raw, _ := txn.First(string(obj.Kind), "id", obj.ID); raw != nil {
			prev = &raw.(*row).Object
			obj.CreatedIndex = prev.CreatedIndex
		}
		previous = append(previous, prev)
	}
	fail := func(err error, written int) ([]Object, error) {
		if undoErr := s.undo(batch[:written], previous[:written], revision); undoErr != nil {
			return nil, fmt.Errorf("%w; putting back the objects already written also failed: %v", err, undoErr)
		}
		return nil, err
	}
	if batcher, ok := s.backend.(batchBackend); ok {
		if written, err := batcher.PutBatch(batch); err != nil {
			return fail(err, written)
		}
	} else {
		for i := range batch {
			if err := s.backend.Put(batch[i]); err != nil {
				return fail(err, i)
			}
		}
	}
	for i := range batch {
		obj := &batch[i]
		if err := txn.Insert(string(obj.Kind), newRow(*obj)); err != nil {
			panic(fmt.Sprintf("BUG: store: indexing %s/%s: %v", obj.Kind, obj.ID, err))
		}
	}
	setRevision(txn, revision)
	txn.Commit()
	return batch, nil
}

// undo puts back on disk what written[i] replaced (previous[i]), or removes it when it was
// new. revision is the highest one the failed batch consumed; it stays consumed.
func (s *Store) undo(written []Object, previous []*Object, revision uint64) error {
	var errs []error
	for i := len(written) - 1; i >= 0; i-- {
		if previous[i] != nil {
			errs = append(errs, s.backend.Put(*previous[i]))
			continue
		}
		errs = append(errs, s.backend.Delete(written[i].Kind, written[i].ID, revision))
	}
	return errors.Join(errs...)
}

// Delete removes the object kind/id and reports whether it existed. The change is
// durable when Delete returns.
func (s *Store) Delete(kind Kind, id string) (bool, error) {
	if !knownKind(kind) {
		return false, fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	if s.remote != nil {
		return s.remoteDelete(kind, id)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return false, ErrClosed
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	prev, _ := txn.First(string(kind), "id", id)
	if prev == nil {
		return false, nil
	}
	revision := revisionOf(txn) + 1
	if err := s.backend.Delete(kind, id, revision); err != nil {
		return false, err
	}
	if err := txn.Delete(string(kind), prev); err != nil {
		panic(fmt.Sprintf("BUG: store: unindexing %s/%s: %v", kind, id, err))
	}
	setRevision(txn, revision)
	txn.Commit()
	return true, nil
}

// NewID consumes a revision and returns it as an id for POST, zero-padded to 20 digits
// like APISIX ("00000000000000000089"). The id is unique across restarts.
func (s *Store) NewID() (string, error) {
	if s.remote != nil {
		return s.remoteNewID()
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	revision := revisionOf(txn) + 1
	if err := s.backend.SetRevision(revision); err != nil {
		return "", err
	}
	setRevision(txn, revision)
	txn.Commit()
	return fmt.Sprintf("%020d", revision), nil
}

func setRevision(txn *memdb.Txn, revision uint64) {
	if err := txn.Insert(metaTable, &revisionRow{Name: revisionKey, Revision: revision}); err != nil {
		panic(fmt.Sprintf("BUG: store: setting revision: %v", err))
	}
}

// Snapshot decodes every stored object into a conf.Snapshot at one consistent revision.
// An object that no longer decodes (stored by an older binary, edited by hand) does not
// stop it: the object is named in LeftOut with the decoder's message and is absent from
// the lists, so a start or a write is never refused for an object it did not touch.
func (s *Store) Snapshot() *conf.Snapshot {
	return s.SnapshotWith()
}

// Decode checks and decodes value as an object of kind, as the store does when it stores
// one: into a *conf.Route, *conf.Upstream, ... (conf.ChangeOf takes it).
func Decode(kind Kind, id string, value []byte) (any, error) {
	return specOf(kind).decode(id, value)
}

// Change is one write as SnapshotWith applies it: Value is the object to store, nil to
// delete it.
type Change struct {
	Kind  Kind
	ID    string
	Value json.RawMessage
}

// SnapshotWith is Snapshot as it would be after changes, which are not stored. The
// Admin API builds the snapshot a write would produce from it, checks it and, once the
// write is stored, publishes that same snapshot. The version is the revision now: the
// caller sets the one the write produced.
func (s *Store) SnapshotWith(changes ...Change) *conf.Snapshot {
	txn := s.db.Txn(false)
	snap := &conf.Snapshot{
		Version:   revisionOf(txn),
		Routes:    []conf.Route{},
		Upstreams: []conf.Upstream{},
		Services:  []conf.Service{},
		Consumers: []conf.Consumer{},

		PluginConfigs: []conf.PluginConfig{},
		GlobalRules:   []conf.GlobalRule{},
		SSLs:          []conf.SSL{},
	}
	for _, spec := range kindSpecs {
		pending := map[string]json.RawMessage{}
		for _, c := range changes {
			if c.Kind == spec.kind {
				pending[c.ID] = c.Value
			}
		}
		add := func(id string, decoded any, err error) {
			if err != nil {
				snap.LeftOut = append(snap.LeftOut, conf.LeftOut{Kind: string(spec.kind), ID: conf.ID(id), Reason: err.Error()})
				return
			}
			spec.add(snap, decoded)
		}
		addValue := func(id string, value json.RawMessage) {
			decoded, err := spec.decode(id, value)
			add(id, decoded, err)
		}
		it, err := txn.Get(string(spec.kind), "created")
		if err != nil {
			panic(fmt.Sprintf("BUG: store: listing %s: %v", spec.kind, err))
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			r := raw.(*row)
			value, changed := pending[r.ID]
			if !changed {
				add(r.ID, r.decoded, r.decodeErr)
				continue
			}
			delete(pending, r.ID)
			if value != nil {
				addValue(r.ID, value) // replaced in place: the kind's order is kept
			}
		}
		// New objects, in the order the changes name them.
		for _, c := range changes {
			if value, ok := pending[c.ID]; ok && c.Kind == spec.kind && value != nil {
				delete(pending, c.ID)
				addValue(c.ID, value)
			}
		}
	}
	return snap
}

// Close releases the backend; later writes fail with ErrClosed, reads keep answering from
// memory.
func (s *Store) Close() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.remote != nil {
		s.remote.closeWaiters()
		return s.remote.remote.Close()
	}
	return s.backend.Close()
}
