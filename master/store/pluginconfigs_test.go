package store

import (
	"testing"
)

// plugin_configs and global_rules are stored, persisted and snapshotted like every other
// kind, in creation order.
func TestPluginConfigsAndGlobalRulesSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	putT(t, s, PluginConfigs, "2", `{"id":"2","plugins":{"key-auth":{}}}`)
	putT(t, s, PluginConfigs, "1", `{"id":"1","name":"n","plugins":{}}`)
	putT(t, s, GlobalRules, "g", `{"id":"g","plugins":{"prometheus":{}}}`)
	snap := s.Snapshot()
	if len(snap.PluginConfigs) != 2 || snap.PluginConfigs[0].ID != "2" || snap.PluginConfigs[1].Name != "n" {
		t.Fatalf("PluginConfigs = %+v", snap.PluginConfigs)
	}
	if len(snap.GlobalRules) != 1 || string(snap.GlobalRules[0].Plugins["prometheus"]) != `{}` {
		t.Fatalf("GlobalRules = %+v", snap.GlobalRules)
	}
	s.Close()

	reopened := openT(t, dir)
	if _, ok := reopened.Get(GlobalRules, "g"); !ok {
		t.Error("global rule g lost on reopen")
	}
	empty := openT(t, t.TempDir()).Snapshot()
	if empty.PluginConfigs == nil || empty.GlobalRules == nil {
		t.Errorf("an empty store's snapshot should hold empty lists, got %+v", empty)
	}

	putT(t, reopened, GlobalRules, "bad", `{"id":"bad"}`)
	if snap := reopened.Snapshot(); !snap.IsLeftOut("global_rules", "bad") || len(snap.GlobalRules) != 1 {
		t.Errorf("Snapshot over an undecodable global rule: LeftOut %v, rules %v; want it left out", snap.LeftOut, snap.GlobalRules)
	}
}
