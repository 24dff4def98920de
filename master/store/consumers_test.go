package store

import (
	"testing"
)

// Consumers are stored, persisted and snapshotted like every other kind, keyed by
// username.
func TestConsumersSnapshotAndPersist(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, Consumers, "jack", `{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`)
	putT(t, s, Consumers, "jill", `{"username":"jill"}`)
	snap := s.Snapshot()
	if len(snap.Consumers) != 2 || snap.Consumers[0].Username != "jack" || snap.Consumers[1].Username != "jill" {
		t.Fatalf("Consumers = %+v", snap.Consumers)
	}
	if got := string(snap.Consumers[0].Plugins["key-auth"]); got != `{"key":"k1"}` {
		t.Errorf("key-auth config = %s", got)
	}
	s.Close()

	reopened := openT(t, dir)
	if obj, ok := reopened.Get(Consumers, "jill"); !ok || string(obj.Value) != `{"username":"jill"}` {
		t.Errorf("after reopen: %+v %v", obj, ok)
	}
	empty := openT(t, t.TempDir()).Snapshot()
	if empty.Consumers == nil {
		t.Errorf("an empty store's snapshot should hold an empty consumer list, got %v", empty)
	}

	putT(t, reopened, Consumers, "bad", `{"username":"a.b"}`)
	if snap := reopened.Snapshot(); !snap.IsLeftOut("consumers", "bad") {
		t.Errorf("Snapshot over an undecodable consumer: LeftOut %v, want it to name consumers/bad", snap.LeftOut)
	}
}
