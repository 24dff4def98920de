package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenReportsEveryDamagedFileAndLoadsNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "good", `{"uri":"/g"}`)
	putT(t, s, Routes, "torn", `{"uri":"/t"}`)
	putT(t, s, Upstreams, "flipped", `{"nodes":{"127.0.0.1:80":1}}`)
	s.Close()

	torn := filepath.Join(dir, "routes", "torn.json")
	data, err := os.ReadFile(torn)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(torn, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	flipped := filepath.Join(dir, "upstreams", "flipped.json")
	data, err = os.ReadFile(flipped)
	if err != nil {
		t.Fatal(err)
	}
	// Still valid JSON, a different upstream: only the checksum can tell.
	if err := os.WriteFile(flipped, []byte(strings.Replace(string(data), "127.0.0.1", "127.0.0.3", 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	_, err = Open(dir)
	var damage *CorruptError
	if !errors.As(err, &damage) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want a CorruptError", err)
	}
	reasons := map[string]string{}
	for _, f := range damage.Files {
		reasons[f.Path] = f.Reason
	}
	if len(reasons) != 2 || !strings.Contains(reasons[torn], "torn") || !strings.Contains(reasons[flipped], "checksum mismatch") {
		t.Errorf("damaged files = %q, want %s (torn) and %s (checksum)", damage.Files, torn, flipped)
	}
	msg := err.Error()
	for _, want := range []string{torn, flipped, "nothing was loaded", "gwctl import"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message spans lines; gwctl start shows only the first: %q", msg)
	}
	// Nothing was changed: the damaged files are still there for the operator to inspect.
	for _, path := range []string{torn, flipped} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestFilesWithoutChecksumStillLoad(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "1", `{"uri":"/a"}`)
	s.Close()
	old := `{"kind":"routes","id":"old","created_index":7,"modified_index":7,"value":{"uri":"/old"}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "routes", "old.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	reopened := openT(t, dir)
	if obj, ok := reopened.Get(Routes, "old"); !ok || string(obj.Value) != `{"uri":"/old"}` {
		t.Errorf("pre-checksum file: %+v %v", obj, ok)
	}
}

func TestChecksumSurvivesCharactersJSONWouldEscape(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	value := `{"uri":"/a","vars":[["arg_n",">","1"],["arg_m","~~","a&b<c"]]}`
	putT(t, s, Routes, "1", value)
	s.Close()
	reopened := openT(t, dir)
	if obj, _ := reopened.Get(Routes, "1"); string(obj.Value) != value {
		t.Errorf("value after reopen = %s, want %s", obj.Value, value)
	}
}

func TestRevisionFileNeverGoesBack(t *testing.T) {
	dir := t.TempDir()
	backend, err := openDirBackend(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.SetRevision(10); err != nil {
		t.Fatal(err)
	}
	if err := backend.SetRevision(9); err == nil {
		t.Error("SetRevision(9) after 10 succeeded")
	}
	if err := backend.SetRevision(10); err != nil {
		t.Errorf("SetRevision(10) again: %v", err)
	}
	reloaded, _ := openDirBackend(dir)
	if _, revision, err := reloaded.Load(Kinds()); err != nil || revision != 10 {
		t.Fatalf("Load = %d, %v; want 10", revision, err)
	}
	if err := reloaded.SetRevision(3); err == nil {
		t.Error("SetRevision(3) after loading 10 succeeded")
	}
}

func TestReadDirChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "1", `{"uri":"/a"}`)
	s.Close()
	leftover := filepath.Join(dir, "routes", "tmp-123")
	if err := os.WriteFile(leftover, []byte("{half"), 0o600); err != nil {
		t.Fatal(err)
	}
	objects, revision, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || objects[0].ID != "1" || revision != 0 {
		t.Errorf("ReadDir = %+v, %d", objects, revision)
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Errorf("ReadDir removed %s: %v", leftover, err)
	}
	if _, _, err := ReadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadDir of a missing directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Error("ReadDir created the missing directory")
	}
}

func TestPutAll(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Upstreams, "u", `{"nodes":{}}`)
	got, err := s.PutAll([]Object{
		{Kind: Upstreams, ID: "u", Value: json.RawMessage(`{"nodes": {"a:1": 1}}`)},
		{Kind: Routes, ID: "r", Value: json.RawMessage(`{"upstream_id":"u"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].CreatedIndex != 1 || got[0].ModifiedIndex != 2 || got[1].CreatedIndex != 3 || s.Revision() != 3 {
		t.Errorf("indexes = %+v, revision %d", got, s.Revision())
	}
	s.Close()
	reopened := openT(t, dir)
	if obj, _ := reopened.Get(Upstreams, "u"); string(obj.Value) != `{"nodes":{"a:1":1}}` {
		t.Errorf("upstream after reopen = %s", obj.Value)
	}

	rejects := []struct {
		name string
		objs []Object
	}{
		{"unknown kind", []Object{{Kind: "ssl", ID: "1", Value: json.RawMessage(`{}`)}}},
		{"bad id", []Object{{Kind: Routes, ID: "a/b", Value: json.RawMessage(`{}`)}}},
		{"twice", []Object{{Kind: Routes, ID: "x", Value: json.RawMessage(`{}`)}, {Kind: Routes, ID: "x", Value: json.RawMessage(`{}`)}}},
		{"not JSON", []Object{{Kind: Routes, ID: "x", Value: json.RawMessage(`{`)}}},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			before := reopened.Revision()
			if _, err := reopened.PutAll(tc.objs); err == nil {
				t.Fatal("PutAll accepted it")
			}
			if reopened.Revision() != before {
				t.Errorf("revision moved from %d to %d", before, reopened.Revision())
			}
		})
	}
}

// failOn fails every Put of the object with one id.
type failOn struct {
	*dirBackend
	id string
}

func (b *failOn) Put(obj Object) error {
	if obj.ID == b.id {
		return errors.New("disk full")
	}
	return b.dirBackend.Put(obj)
}

// PutBatch puts in place, with the directory backend's own batch, the objects before the
// one that fails, then fails: a batch cut short in its renames.
func (b *failOn) PutBatch(objs []Object) (int, error) {
	for i, obj := range objs {
		if obj.ID == b.id {
			if _, err := b.dirBackend.PutBatch(objs[:i]); err != nil {
				return 0, err
			}
			return i, errors.New("disk full")
		}
	}
	return b.dirBackend.PutBatch(objs)
}

// putOneByOne hides the directory backend's batch, so that PutAll puts each object alone.
type putOneByOne struct{ Backend }

func TestPutAllFailurePutsBackWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Upstreams, "u", `{"nodes":{}}`)
	s.Close()
	backend, err := openDirBackend(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, batched := range []bool{true, false} {
		t.Run(map[bool]string{true: "batched", false: "one by one"}[batched], func(t *testing.T) {
			testPutAllFailurePutsBack(t, dir, backend, batched)
		})
	}
}

func testPutAllFailurePutsBack(t *testing.T, dir string, backend *dirBackend, batched bool) {
	var failing Backend = &failOn{dirBackend: backend, id: "fails"}
	if !batched {
		failing = putOneByOne{failing}
	}
	s, err := OpenBackend(failing)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.PutAll([]Object{
		{Kind: Upstreams, ID: "u", Value: json.RawMessage(`{"nodes":{"changed:1":1}}`)},
		{Kind: Routes, ID: "new", Value: json.RawMessage(`{"uri":"/n"}`)},
		{Kind: Routes, ID: "fails", Value: json.RawMessage(`{"uri":"/f"}`)},
	})
	if err == nil {
		t.Fatal("PutAll succeeded on a failing backend")
	}
	if obj, _ := s.Get(Upstreams, "u"); string(obj.Value) != `{"nodes":{}}` {
		t.Errorf("in memory: upstream = %s, want the original", obj.Value)
	}
	if _, ok := s.Get(Routes, "new"); ok {
		t.Error("in memory: route new exists")
	}
	s.Close()
	reopened := openT(t, dir)
	if obj, _ := reopened.Get(Upstreams, "u"); string(obj.Value) != `{"nodes":{}}` {
		t.Errorf("on disk: upstream = %s, want the original", obj.Value)
	}
	if _, ok := reopened.Get(Routes, "new"); ok {
		t.Error("on disk: route new exists")
	}
}

func TestScratchIsACopyThatPersistsNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "1", `{"uri":"/a"}`)
	scratch, err := s.Scratch()
	if err != nil {
		t.Fatal(err)
	}
	if obj, ok := scratch.Get(Routes, "1"); !ok || string(obj.Value) != `{"uri":"/a"}` || scratch.Revision() != s.Revision() {
		t.Fatalf("scratch copy = %+v %v, revision %d", obj, ok, scratch.Revision())
	}
	putT(t, scratch, Routes, "2", `{"uri":"/b"}`)
	if _, err := scratch.Delete(Routes, "1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(Routes, "2"); ok {
		t.Error("a scratch write reached the store")
	}
	if _, ok := s.Get(Routes, "1"); !ok {
		t.Error("a scratch delete reached the store")
	}
	s.Close()
	reopened := openT(t, dir)
	if _, ok := reopened.Get(Routes, "2"); ok || reopened.Revision() != 1 {
		t.Errorf("a scratch write reached the disk (revision %d)", reopened.Revision())
	}
}

func FuzzLoadObject(f *testing.F) {
	f.Add([]byte(`{"kind":"routes","id":"1","created_index":1,"modified_index":2,"value":{"uri":"/a"},"checksum":"crc32c:00000000"}`))
	f.Add([]byte(`{"kind":"routes","id":"1","created_index":1,"modified_index":1,"value":{}}`))
	f.Add([]byte(`{"kind":"routes","id":"1","created_ind`))
	path := filepath.Join(f.TempDir(), "1.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		obj, err := loadObject(path, Routes, "1")
		if err != nil {
			return
		}
		if obj.Kind != Routes || obj.ID != "1" || obj.CreatedIndex == 0 || obj.ModifiedIndex < obj.CreatedIndex || !json.Valid(obj.Value) {
			t.Fatalf("accepted a bad object: %+v", obj)
		}
	})
}

// TestDamagedFileReasonsSpeakPlainly: each reason says what is wrong in the file's own
// words (its field names), without store internals.
func TestDamagedFileReasonsSpeakPlainly(t *testing.T) {
	for name, tt := range map[string]struct{ file, want string }{
		"indexes": {`{"kind":"routes","id":"x","created_index":0,"modified_index":3,"value":{}}`,
			"its revision numbers are damaged: created_index 0, modified_index 3 (the first must be 1 or more, the second no less than the first)"},
		"moved": {`{"kind":"routes","id":"y","created_index":1,"modified_index":1,"value":{}}`,
			"holds routes/y, but its path says routes/x (copied or renamed by hand?)"},
		"value": {`{"kind":"routes","id":"x","created_index":1,"modified_index":1,"value":[1]}`,
			"its value is not a JSON object"},
	} {
		dir := t.TempDir()
		s := openT(t, dir)
		s.Close()
		if err := os.WriteFile(filepath.Join(dir, "routes", "x.json"), []byte(tt.file+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir)
		var damage *CorruptError
		if !errors.As(err, &damage) || len(damage.Files) != 1 || damage.Files[0].Reason != tt.want {
			t.Errorf("%s: Open = %v, want the reason %q", name, err, tt.want)
		}
	}
}
