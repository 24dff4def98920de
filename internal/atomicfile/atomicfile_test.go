package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old contents, longer than the new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600, ".f.tmp-*"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new" {
		t.Fatalf("contents %q, %v; want new", got, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want just the file (no temporary left)", len(entries))
	}
}

func TestWriteFailureLeavesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A pattern with a separator makes the temporary file impossible.
	if err := Write(path, []byte("new"), 0o600, "missing/x-*"); err == nil {
		t.Fatal("Write with an impossible temporary succeeded")
	}
	if got, _ := os.ReadFile(path); string(got) != "kept" {
		t.Errorf("contents %q after a failed Write, want kept", got)
	}
	if err := Write(filepath.Join(dir, "nodir", "f"), nil, 0o600, "x-*"); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}
