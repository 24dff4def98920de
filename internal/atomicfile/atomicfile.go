// Package atomicfile replaces files so that a crash at any moment leaves either the old
// contents or the new ones, never a mix, and the new ones are on disk once Write returns.
// The store's object files, the pid file and gwctl export's backups all go through it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file named by pattern (os.CreateTemp's) in
// path's directory is written, synced, given perm and renamed over path, then the
// directory is synced so that the rename itself survives a crash. On error the temporary
// file is removed and path is untouched.
func Write(path string, data []byte, perm os.FileMode, pattern string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes the directory's entries (created, renamed or removed files) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
