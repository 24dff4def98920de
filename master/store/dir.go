package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gw/internal/atomicfile"
)

const (
	revisionFile = "revision"
	objectExt    = ".json"
	tmpPrefix    = "tmp-"
)

// objectFile is the on-disk form of one object.
type objectFile struct {
	Kind          Kind            `json:"kind"`
	ID            string          `json:"id"`
	CreatedIndex  uint64          `json:"created_index"`
	ModifiedIndex uint64          `json:"modified_index"`
	Value         json.RawMessage `json:"value"`
	// Checksum is checksumOf(Value); empty in files from before it existed.
	Checksum string `json:"checksum,omitempty"`
}

// dirBackend keeps one file per object under a directory; see the package doc.
type dirBackend struct {
	dir string
	// revision is the highest revision loaded from or written to the revision file; the
	// file is never rewritten with a lower one.
	revision uint64
}

func openDirBackend(dir string) (*dirBackend, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: creating %s: %w", dir, err)
	}
	return &dirBackend{dir: dir}, nil
}

func (b *dirBackend) kindDir(kind Kind) string { return filepath.Join(b.dir, string(kind)) }

func (b *dirBackend) objectPath(kind Kind, id string) string {
	return filepath.Join(b.kindDir(kind), id+objectExt)
}

func (b *dirBackend) Load(kinds []Kind) ([]Object, uint64, error) {
	if err := removeLeftovers(b.dir); err != nil {
		return nil, 0, err
	}
	for _, kind := range kinds {
		dir := b.kindDir(kind)
		if err := os.Mkdir(dir, 0o700); err == nil {
			if err := syncDir(b.dir); err != nil {
				return nil, 0, err
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, 0, fmt.Errorf("store: creating %s: %w", dir, err)
		}
		if err := removeLeftovers(dir); err != nil {
			return nil, 0, err
		}
	}
	objects, revision, err := readDir(b.dir, kinds)
	if err != nil {
		return nil, 0, err
	}
	b.revision = revision
	return objects, revision, nil
}

// ReadDir reads the objects and the revision file of a store directory without changing
// anything in it (no directory created, no leftover removed), for reading the data of a
// master that is not running. It rejects damaged files exactly as Open does.
func ReadDir(dir string) ([]Object, uint64, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, 0, fmt.Errorf("store: %w", err)
	}
	return readDir(dir, Kinds())
}

// readDir reads every object file and the revision file. It goes through all of them
// before failing, so that one start reports every damaged file instead of one per try.
func readDir(dir string, kinds []Kind) ([]Object, uint64, error) {
	damage := &CorruptError{Dir: dir}
	revision, err := readRevision(filepath.Join(dir, revisionFile))
	if err != nil {
		damage.add(filepath.Join(dir, revisionFile), err)
	}
	var objects []Object
	for _, kind := range kinds {
		kindDir := filepath.Join(dir, string(kind))
		entries, err := os.ReadDir(kindDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("store: reading %s: %w", kindDir, err)
		}
		for _, entry := range entries {
			if entry.IsDir() || !strings.HasSuffix(entry.Name(), objectExt) {
				continue
			}
			path := filepath.Join(kindDir, entry.Name())
			obj, err := loadObject(path, kind, strings.TrimSuffix(entry.Name(), objectExt))
			if err != nil {
				damage.add(path, err)
				continue
			}
			objects = append(objects, obj)
		}
	}
	if len(damage.Files) > 0 {
		return nil, 0, damage
	}
	return objects, revision, nil
}

// ErrCorrupt is what a CorruptError matches with errors.Is.
var ErrCorrupt = errors.New("store: damaged files")

// DamagedFile is one file Open refused, and why.
type DamagedFile struct {
	Path   string
	Reason string
}

// CorruptError lists every damaged file of a store directory. Open loads nothing when it
// returns one: serving a store with an object silently missing would be worse than not
// starting. The message is a single line because it travels to `gwctl start` as one.
type CorruptError struct {
	Dir   string
	Files []DamagedFile
}

func (e *CorruptError) add(path string, err error) {
	e.Files = append(e.Files, DamagedFile{Path: path, Reason: err.Error()})
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s: %d damaged file(s), so nothing was loaded:", e.Dir, len(e.Files))
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s: %s", f.Path, f.Reason)
	}
	fmt.Fprintf(&b, ". To start, move the damaged files out of %s, then restore their objects "+
		"with `gwctl import` from a backup or re-create them through the Admin API "+
		"(a damaged revision file may instead be rewritten holding a number at least as large as every \"modified_index\")", e.Dir)
	return b.String()
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func readRevision(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	revision, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a revision number: %q", truncate(data))
	}
	return revision, nil
}

// checksumOf is the checksum an object file carries for its value. JSON validity alone
// catches a truncated file, but not a flipped byte inside a string ("127.0.0.1" becoming
// "127.0.0.3" still parses); CRC-32C catches that, and costs nothing at Admin API rates.
func checksumOf(value []byte) string {
	return fmt.Sprintf("crc32c:%08x", crc32.Checksum(value, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// loadObject reads one object file; the error is the reason alone, the caller adds the path.
func loadObject(path string, kind Kind, id string) (Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Object{}, err
	}
	var file objectFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return Object{}, fmt.Errorf("not a whole object file (torn or edited?): %w", err)
	}
	if dec.More() {
		return Object{}, errors.New("not a whole object file: data after the object")
	}
	switch {
	case file.Kind != kind || file.ID != id:
		return Object{}, fmt.Errorf("holds %s/%s, but its path says %s/%s (copied or renamed by hand?)", file.Kind, file.ID, kind, id)
	case !ValidID(id):
		return Object{}, fmt.Errorf("%w %q", ErrInvalidID, id)
	case file.CreatedIndex == 0 || file.ModifiedIndex < file.CreatedIndex:
		return Object{}, fmt.Errorf("its revision numbers are damaged: created_index %d, modified_index %d (the first must be 1 or more, the second no less than the first)", file.CreatedIndex, file.ModifiedIndex)
	case len(file.Value) == 0 || file.Value[0] != '{':
		return Object{}, errors.New("its value is not a JSON object")
	// Files written before checksums existed have none; they still load.
	case file.Checksum != "" && file.Checksum != checksumOf(file.Value):
		return Object{}, fmt.Errorf("its value changed after gw wrote it (checksum mismatch: the file says %s, the value has %s)", file.Checksum, checksumOf(file.Value))
	}
	return Object{Kind: kind, ID: id, Value: file.Value, CreatedIndex: file.CreatedIndex, ModifiedIndex: file.ModifiedIndex}, nil
}

func truncate(data []byte) string {
	const limit = 40
	if len(data) > limit {
		return string(data[:limit]) + "..."
	}
	return string(data)
}

func (b *dirBackend) Put(obj Object) error {
	// No HTML escaping: the file must hold the value byte for byte as the checksum saw it
	// (json.Marshal would turn a route's ">" into "\u003e").
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false)
	err := enc.Encode(objectFile{
		Kind: obj.Kind, ID: obj.ID, CreatedIndex: obj.CreatedIndex, ModifiedIndex: obj.ModifiedIndex, Value: obj.Value,
		Checksum: checksumOf(obj.Value),
	})
	if err != nil {
		return fmt.Errorf("store: encoding %s/%s: %w", obj.Kind, obj.ID, err)
	}
	return writeFileAtomic(b.objectPath(obj.Kind, obj.ID), data.Bytes())
}

// PutBatch is Put for many objects at the cost of one flush rather than one fsync each
// (a 100,000-route import took over two minutes one fsync at a time). Every object is
// written to a temp file, syncfs(2) makes all of them durable at once, then each is
// renamed into place in order and every directory touched is fsynced. A crash before the
// renames leaves only temp files, which Open removes; one during them leaves a prefix of
// objs, which PutAll's callers order so that every prefix is a consistent store. It
// returns how many objects were renamed into place, for PutAll to put back on failure.
func (b *dirBackend) PutBatch(objs []Object) (int, error) {
	tmps := make([]string, len(objs))
	cleanUp := func(from int) {
		for _, tmp := range tmps[from:] {
			if tmp != "" {
				_ = os.Remove(tmp)
			}
		}
	}
	for i, obj := range objs {
		var data bytes.Buffer
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(objectFile{
			Kind: obj.Kind, ID: obj.ID, CreatedIndex: obj.CreatedIndex, ModifiedIndex: obj.ModifiedIndex, Value: obj.Value,
			Checksum: checksumOf(obj.Value),
		}); err != nil {
			cleanUp(0)
			return 0, fmt.Errorf("store: encoding %s/%s: %w", obj.Kind, obj.ID, err)
		}
		f, err := os.CreateTemp(b.kindDir(obj.Kind), tmpPrefix+"*")
		if err == nil {
			tmps[i] = f.Name()
			_, err = f.Write(data.Bytes())
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			cleanUp(0)
			return 0, fmt.Errorf("store: writing %s/%s: %w", obj.Kind, obj.ID, err)
		}
	}
	dir, err := os.Open(b.dir)
	if err != nil {
		cleanUp(0)
		return 0, fmt.Errorf("store: %w", err)
	}
	err = unix.Syncfs(int(dir.Fd()))
	dir.Close()
	if err != nil {
		cleanUp(0)
		return 0, fmt.Errorf("store: syncfs %s: %w", b.dir, err)
	}
	touched := map[Kind]bool{}
	for i, obj := range objs {
		if err := os.Rename(tmps[i], b.objectPath(obj.Kind, obj.ID)); err != nil {
			cleanUp(i)
			return i, fmt.Errorf("store: renaming %s into place: %w", tmps[i], err)
		}
		touched[obj.Kind] = true
	}
	for kind := range touched {
		if err := syncDir(b.kindDir(kind)); err != nil {
			return len(objs), err
		}
	}
	return len(objs), nil
}

func (b *dirBackend) Delete(kind Kind, id string, revision uint64) error {
	// The revision goes first: if we crash before the remove, the object survives under a
	// higher revision, which is harmless; the other order could hand out an index twice.
	if err := b.SetRevision(revision); err != nil {
		return err
	}
	path := b.objectPath(kind, id)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: removing %s: %w", path, err)
	}
	return syncDir(b.kindDir(kind))
}

func (b *dirBackend) SetRevision(revision uint64) error {
	if revision < b.revision {
		return fmt.Errorf("BUG: store: revision would go back from %d to %d", b.revision, revision)
	}
	if err := writeFileAtomic(filepath.Join(b.dir, revisionFile), []byte(strconv.FormatUint(revision, 10)+"\n")); err != nil {
		return err
	}
	b.revision = revision
	return nil
}

func (b *dirBackend) Close() error { return nil }

// writeFileAtomic replaces path with data so that after a crash the file holds either
// the old or the new contents, and the new contents are on disk when it returns. Its
// temporary files start with tmpPrefix, so that a load can clean up after a crash.
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o600, tmpPrefix+"*"); err != nil {
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// removeLeftovers deletes temp files a crash left behind in dir; object files always end
// in ".json" and temp files never do, so no id can collide with them.
func removeLeftovers(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("store: reading %s: %w", dir, err)
	}
	for _, entry := range entries {
		name := entry.Name()
		if entry.IsDir() || !strings.HasPrefix(name, tmpPrefix) || strings.HasSuffix(name, objectExt) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("store: removing leftover %s: %w", filepath.Join(dir, name), err)
		}
	}
	return nil
}
