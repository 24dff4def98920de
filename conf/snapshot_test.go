package conf

import (
	"reflect"
	"testing"
)

func TestApplyPutsInPlaceAppendsAndDeletes(t *testing.T) {
	base := &Snapshot{Version: 1,
		Routes:    []Route{{ID: "a", URI: "/a"}, {ID: "b", URI: "/b"}, {ID: "c", URI: "/c"}},
		Upstreams: []Upstream{{ID: "u"}},
	}
	d := &Delta{From: 1, To: 4, Changes: []Change{
		ChangeOf("routes", "b", &Route{ID: "b", URI: "/b2"}), // replaced where it was
		ChangeOf("routes", "d", &Route{ID: "d", URI: "/d"}),  // new: last
		{Kind: "routes", ID: "a"},                            // deleted
		{Kind: "routes", ID: "nothing"},                      // deleting what is not there
	}}
	next := base.Apply(d)
	want := []Route{{ID: "b", URI: "/b2"}, {ID: "c", URI: "/c"}, {ID: "d", URI: "/d"}}
	if !reflect.DeepEqual(next.Routes, want) || next.Version != 4 {
		t.Fatalf("Apply: routes %+v version %d, want %+v version 4", next.Routes, next.Version, want)
	}
	if len(base.Routes) != 3 || base.Routes[0].ID != "a" || base.Routes[1].URI != "/b" {
		t.Errorf("Apply changed the snapshot it was applied to: %+v", base.Routes)
	}
	if &next.Upstreams[0] != &base.Upstreams[0] {
		t.Errorf("a kind the delta does not change should be shared, not copied")
	}
	// Applying the same delta again changes nothing: the master may send a worker a
	// snapshot that already holds a write, then the write.
	if again := next.Apply(d); !reflect.DeepEqual(again.Routes, next.Routes) {
		t.Errorf("applying a delta twice: %+v, want %+v", again.Routes, next.Routes)
	}
}

func TestApplyLeavesOutWhatTheDeltaSaysIsLeftOut(t *testing.T) {
	base := &Snapshot{Routes: []Route{{ID: "a"}, {ID: "b"}}}
	next := base.Apply(&Delta{To: 2, LeftOut: []LeftOut{{Kind: "routes", ID: "b", Reason: "does not build"}}})
	if len(next.Routes) != 1 || next.Routes[0].ID != "a" || !next.IsLeftOut("routes", "b") || len(next.LeftOut) != 1 {
		t.Errorf("Apply: routes %+v, left out %+v; want only a, and b left out once", next.Routes, next.LeftOut)
	}
}

func TestChangeOfEveryKind(t *testing.T) {
	for _, c := range []struct {
		kind string
		v    any
	}{
		{"routes", &Route{}}, {"upstreams", &Upstream{}}, {"services", &Service{}}, {"consumers", &Consumer{}},
		{"plugin_configs", &PluginConfig{}}, {"global_rules", &GlobalRule{}}, {"ssls", &SSL{}},
	} {
		if ch := ChangeOf(c.kind, "x", c.v); ch.Deleted() {
			t.Errorf("ChangeOf(%s, %T) reads as a delete", c.kind, c.v)
		}
	}
	if ch := ChangeOf("routes", "x", nil); !ch.Deleted() || ch.Key() != "routes/x" {
		t.Errorf("ChangeOf with no object: %+v, want a delete of routes/x", ch)
	}
}
