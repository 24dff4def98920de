package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func putT(t *testing.T, s *Store, kind Kind, id, value string) (Object, bool) {
	t.Helper()
	obj, created, err := s.Put(kind, id, json.RawMessage(value))
	if err != nil {
		t.Fatalf("Put(%s, %s): %v", kind, id, err)
	}
	return obj, created
}

func TestOpenCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	openT(t, dir)
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("dir mode = %o, want 700", perm)
	}
}

func TestRoundTripAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Upstreams, "u1", `{"id":"u1","nodes":{"127.0.0.1:80":1}}`)
	putT(t, s, Routes, "2", `{"id":"2","uri":"/b","upstream_id":"u1"}`)
	putT(t, s, Routes, "1", `{"id":"1", "uri":"/a"}`)
	putT(t, s, Routes, "2", `{"id":"2","uri":"/b2","upstream_id":"u1"}`)
	putT(t, s, Services, "s", `{"id":"s"}`)
	want := map[Kind][]Object{}
	for _, kind := range Kinds() {
		want[kind] = s.List(kind)
	}
	wantRevision := s.Revision()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	reopened := openT(t, dir)
	if got := reopened.Revision(); got != wantRevision {
		t.Errorf("revision after reopen = %d, want %d", got, wantRevision)
	}
	for _, kind := range Kinds() {
		got := reopened.List(kind)
		if fmt.Sprint(got) != fmt.Sprint(want[kind]) {
			t.Errorf("List(%s) after reopen:\n got %v\nwant %v", kind, got, want[kind])
		}
	}
	// Route 2 was created before route 1 and replaced after it: List keeps creation order.
	routes := reopened.List(Routes)
	if len(routes) != 2 || routes[0].ID != "2" || routes[1].ID != "1" {
		t.Fatalf("routes order = %v, want 2 then 1", routes)
	}
	if string(routes[1].Value) != `{"id":"1","uri":"/a"}` {
		t.Errorf("value stored as %s, want compacted JSON", routes[1].Value)
	}
}

func TestPutCreatedVersusReplaced(t *testing.T) {
	s := openT(t, t.TempDir())
	first, created := putT(t, s, Routes, "1", `{"uri":"/a"}`)
	if !created || first.CreatedIndex != 1 || first.ModifiedIndex != 1 {
		t.Fatalf("first Put = %+v created %v, want indexes 1/1, created", first, created)
	}
	putT(t, s, Routes, "other", `{"uri":"/o"}`)
	second, created := putT(t, s, Routes, "1", `{"uri":"/b"}`)
	if created || second.CreatedIndex != 1 || second.ModifiedIndex != 3 {
		t.Fatalf("second Put = %+v created %v, want indexes 1/3, replaced", second, created)
	}
	got, ok := s.Get(Routes, "1")
	if !ok || string(got.Value) != `{"uri":"/b"}` || got.ModifiedIndex != 3 {
		t.Errorf("Get after replace = %+v, %v", got, ok)
	}
	if _, ok := s.Get(Upstreams, "1"); ok {
		t.Error("kinds are separate, but Get(upstreams, 1) found the route")
	}
}

func TestPutRejects(t *testing.T) {
	s := openT(t, t.TempDir())
	cases := []struct {
		name  string
		kind  Kind
		id    string
		value string
		want  error
	}{
		{"unknown kind", "nosuchkind", "1", `{}`, ErrUnknownKind},
		{"empty id", Routes, "", `{}`, ErrInvalidID},
		{"dot", Routes, ".", `{}`, ErrInvalidID},
		{"dot dot", Routes, "..", `{}`, ErrInvalidID},
		{"slash", Routes, "a/b", `{}`, ErrInvalidID},
		{"65 chars", Routes, strings.Repeat("a", 65), `{}`, ErrInvalidID},
		{"space", Routes, "a b", `{}`, ErrInvalidID},
		{"not json", Routes, "1", `{`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Put(tc.kind, tc.id, json.RawMessage(tc.value))
			if err == nil {
				t.Fatal("Put succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if s.Revision() != 0 {
		t.Errorf("rejected Puts moved the revision to %d", s.Revision())
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"1", "a-b_c.d", strings.Repeat("Z", 64), "00000000000000000089", "..."} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false, want true", id)
		}
	}
}

func TestDeletePersisted(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "1", `{"uri":"/a"}`)
	putT(t, s, Routes, "2", `{"uri":"/b"}`)
	deleted, err := s.Delete(Routes, "2")
	if err != nil || !deleted {
		t.Fatalf("Delete = %v, %v", deleted, err)
	}
	if deleted, err := s.Delete(Routes, "2"); err != nil || deleted {
		t.Fatalf("second Delete = %v, %v; want false, nil", deleted, err)
	}
	if s.Revision() != 3 {
		t.Errorf("revision after delete = %d, want 3", s.Revision())
	}
	s.Close()

	reopened := openT(t, dir)
	if _, ok := reopened.Get(Routes, "2"); ok {
		t.Error("deleted route is back after reopen")
	}
	if _, ok := reopened.Get(Routes, "1"); !ok {
		t.Error("route 1 lost")
	}
	// The deleted route held the highest index; the revision must not fall back to 1.
	if reopened.Revision() != 3 {
		t.Errorf("revision after reopen = %d, want 3", reopened.Revision())
	}
}

func TestRevisionMonotonicAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	var last uint64
	var ids []string
	for round := 0; round < 3; round++ {
		s := openT(t, dir)
		if s.Revision() < last {
			t.Fatalf("round %d: revision went back from %d to %d", round, last, s.Revision())
		}
		id, err := s.NewID()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		obj, _ := putT(t, s, Routes, id, `{"uri":"/x"}`)
		if obj.ModifiedIndex <= last {
			t.Fatalf("round %d: index %d not above %d", round, obj.ModifiedIndex, last)
		}
		if _, err := s.Delete(Routes, id); err != nil {
			t.Fatal(err)
		}
		last = s.Revision()
		s.Close()
	}
	want := []string{"00000000000000000001", "00000000000000000004", "00000000000000000007"}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("NewID across reopens = %v, want %v", ids, want)
	}
}

func TestOpenRejectsCorruptFiles(t *testing.T) {
	cases := []struct {
		name, path, content string
	}{
		{"truncated object", "routes/1.json", `{"kind":"routes","id":"1","created_ind`},
		{"unknown field", "routes/1.json", `{"kind":"routes","id":"1","created_index":1,"modified_index":1,"value":{},"x":1}`},
		{"wrong id", "routes/1.json", `{"kind":"routes","id":"2","created_index":1,"modified_index":1,"value":{}}`},
		{"wrong kind", "upstreams/1.json", `{"kind":"routes","id":"1","created_index":1,"modified_index":1,"value":{}}`},
		{"zero index", "routes/1.json", `{"kind":"routes","id":"1","created_index":0,"modified_index":1,"value":{}}`},
		{"modified before created", "routes/1.json", `{"kind":"routes","id":"1","created_index":5,"modified_index":4,"value":{}}`},
		{"value not object", "routes/1.json", `{"kind":"routes","id":"1","created_index":1,"modified_index":1,"value":[1]}`},
		{"bad revision", "revision", "12x\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir)
			putT(t, s, Routes, "good", `{"uri":"/g"}`)
			s.Close()
			path := filepath.Join(dir, tc.path)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir)
			if err == nil {
				t.Fatal("Open succeeded over a corrupt file")
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
		})
	}
}

func TestOpenDuplicateCreatedIndex(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "a", `{}`)
	s.Close()
	data, err := os.ReadFile(filepath.Join(dir, "routes", "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	copyData := strings.Replace(string(data), `"id":"a"`, `"id":"b"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "routes", "b.json"), []byte(copyData), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("Open accepted two objects with one created index")
	}
}

func TestOpenRemovesLeftoverTempFiles(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "1", `{}`)
	s.Close()
	leftovers := []string{filepath.Join(dir, "tmp-123"), filepath.Join(dir, "routes", "tmp-456")}
	for _, path := range leftovers {
		if err := os.WriteFile(path, []byte("{half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reopened := openT(t, dir)
	if _, ok := reopened.Get(Routes, "1"); !ok {
		t.Error("route lost")
	}
	for _, path := range leftovers {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("leftover %s still there (stat err %v)", path, err)
		}
	}
}

func TestClosedStoreRefusesWrites(t *testing.T) {
	s := openT(t, t.TempDir())
	putT(t, s, Routes, "1", `{}`)
	s.Close()
	if _, _, err := s.Put(Routes, "2", json.RawMessage(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Delete(Routes, "1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v, want ErrClosed", err)
	}
	if _, err := s.NewID(); !errors.Is(err, ErrClosed) {
		t.Errorf("NewID after Close: %v, want ErrClosed", err)
	}
	if _, ok := s.Get(Routes, "1"); !ok {
		t.Error("reads should keep working after Close")
	}
}

// failingBackend fails every write, to show a failed persist changes nothing in memory.
type failingBackend struct{ dirBackend }

func (failingBackend) Put(Object) error                  { return errors.New("disk full") }
func (failingBackend) Delete(Kind, string, uint64) error { return errors.New("disk full") }
func (failingBackend) SetRevision(uint64) error          { return errors.New("disk full") }

func TestBackendFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Routes, "1", `{"uri":"/a"}`)
	s.Close()

	backend, err := openDirBackend(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err = OpenBackend(&failingBackend{*backend})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(Routes, "1", json.RawMessage(`{"uri":"/b"}`)); err == nil {
		t.Error("Put succeeded on a failing backend")
	}
	if _, err := s.Delete(Routes, "1"); err == nil {
		t.Error("Delete succeeded on a failing backend")
	}
	if _, err := s.NewID(); err == nil {
		t.Error("NewID succeeded on a failing backend")
	}
	got, ok := s.Get(Routes, "1")
	if !ok || string(got.Value) != `{"uri":"/a"}` || s.Revision() != 1 {
		t.Errorf("after failed writes: %+v %v revision %d; want the original", got, ok, s.Revision())
	}
}

func TestSnapshot(t *testing.T) {
	s := openT(t, t.TempDir())
	empty := s.Snapshot()
	if empty.Version != 0 || len(empty.Routes) != 0 || empty.Routes == nil {
		t.Errorf("empty snapshot = %+v", empty)
	}
	putT(t, s, Upstreams, "u", `{"id":"u","type":"roundrobin","nodes":{"127.0.0.1:80":1}}`)
	putT(t, s, Routes, "b", `{"id":"b","uri":"/b","upstream_id":"u"}`)
	putT(t, s, Routes, "a", `{"id":"a","uri":"/a","upstream_id":"u"}`)
	putT(t, s, Services, "s", `{"id":"s","upstream_id":"u"}`)
	snap := s.Snapshot()
	if snap.Version != s.Revision() || snap.Version != 4 {
		t.Errorf("Version = %d, want %d", snap.Version, s.Revision())
	}
	if len(snap.Routes) != 2 || snap.Routes[0].ID != "b" || snap.Routes[1].URI != "/a" {
		t.Errorf("Routes = %+v", snap.Routes)
	}
	if len(snap.Upstreams) != 1 || snap.Upstreams[0].Type != "roundrobin" {
		t.Errorf("Upstreams = %+v", snap.Upstreams)
	}
	if len(snap.Services) != 1 || snap.Services[0].UpstreamID != "u" {
		t.Errorf("Services = %+v", snap.Services)
	}

	putT(t, s, Routes, "bad", `{"no_such_field":1}`)
	if snap := s.Snapshot(); !snap.IsLeftOut("routes", "bad") {
		t.Errorf("Snapshot over an undecodable route: LeftOut %v, want it to name routes/bad", snap.LeftOut)
	}
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	s := openT(t, t.TempDir())
	const writers, perWriter = 4, 6
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, _, err := s.Put(Routes, id, json.RawMessage(`{"uri":"/x","plugins":{}}`)); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if _, err := s.Delete(Routes, id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var lastRevision uint64
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond): // leave the CPU to the writers
				}
				snap := s.Snapshot()
				if snap.Version < lastRevision {
					t.Errorf("snapshot version went back from %d to %d", lastRevision, snap.Version)
				}
				lastRevision = snap.Version
				list := s.List(Routes)
				for i := 1; i < len(list); i++ {
					if list[i-1].CreatedIndex >= list[i].CreatedIndex {
						t.Errorf("List out of CreatedIndex order: %d then %d", list[i-1].CreatedIndex, list[i].CreatedIndex)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	deletedPerWriter := (perWriter + 2) / 3
	if got, want := len(s.List(Routes)), writers*(perWriter-deletedPerWriter); got != want {
		t.Errorf("%d routes left, want %d", got, want)
	}
	if got, want := s.Revision(), uint64(writers*(perWriter+deletedPerWriter)); got != want {
		t.Errorf("revision = %d, want %d (one per write)", got, want)
	}
}

func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := json.RawMessage(`{"id":"1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Put(Routes, "1", value); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 100; i++ {
		if _, _, err := s.Put(Routes, fmt.Sprint(i), json.RawMessage(`{"uri":"/x"}`)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.Get(Routes, "42"); !ok {
			b.Fatal("missing")
		}
	}
}
