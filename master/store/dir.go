package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
}

// dirBackend keeps one file per object under a directory; see the package doc.
type dirBackend struct {
	dir string
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
	revision, err := b.loadRevision()
	if err != nil {
		return nil, 0, err
	}
	var objects []Object
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
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, 0, fmt.Errorf("store: reading %s: %w", dir, err)
		}
		for _, entry := range entries {
			if entry.IsDir() || !strings.HasSuffix(entry.Name(), objectExt) {
				continue
			}
			path := filepath.Join(dir, entry.Name())
			obj, err := loadObject(path, kind, strings.TrimSuffix(entry.Name(), objectExt))
			if err != nil {
				return nil, 0, err
			}
			objects = append(objects, obj)
		}
	}
	return objects, revision, nil
}

func (b *dirBackend) loadRevision() (uint64, error) {
	path := filepath.Join(b.dir, revisionFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: reading %s: %w", path, err)
	}
	revision, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store: %s: not a revision number: %w", path, err)
	}
	return revision, nil
}

func loadObject(path string, kind Kind, id string) (Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Object{}, fmt.Errorf("store: reading %s: %w", path, err)
	}
	var file objectFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return Object{}, fmt.Errorf("store: %s: %w", path, err)
	}
	switch {
	case file.Kind != kind || file.ID != id:
		return Object{}, fmt.Errorf("store: %s: holds %s/%s, want %s/%s", path, file.Kind, file.ID, kind, id)
	case !ValidID(id):
		return Object{}, fmt.Errorf("store: %s: %w %q", path, ErrInvalidID, id)
	case file.CreatedIndex == 0 || file.ModifiedIndex < file.CreatedIndex:
		return Object{}, fmt.Errorf("store: %s: bad indexes created %d, modified %d", path, file.CreatedIndex, file.ModifiedIndex)
	case len(file.Value) == 0 || file.Value[0] != '{':
		return Object{}, fmt.Errorf("store: %s: value is not a JSON object", path)
	}
	return Object{Kind: kind, ID: id, Value: file.Value, CreatedIndex: file.CreatedIndex, ModifiedIndex: file.ModifiedIndex}, nil
}

func (b *dirBackend) Put(obj Object) error {
	data, err := json.Marshal(objectFile{
		Kind: obj.Kind, ID: obj.ID, CreatedIndex: obj.CreatedIndex, ModifiedIndex: obj.ModifiedIndex, Value: obj.Value,
	})
	if err != nil {
		return fmt.Errorf("store: encoding %s/%s: %w", obj.Kind, obj.ID, err)
	}
	return writeFileAtomic(b.objectPath(obj.Kind, obj.ID), append(data, '\n'))
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
	return writeFileAtomic(filepath.Join(b.dir, revisionFile), []byte(strconv.FormatUint(revision, 10)+"\n"))
}

func (b *dirBackend) Close() error { return nil }

// writeFileAtomic replaces path with data so that after a crash the file holds either
// the old or the new contents, and the new contents are on disk when it returns.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	tmpName := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmpName, path)
	}
	if err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: syncing %s: %w", dir, err)
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("store: syncing %s: %w", dir, err)
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
