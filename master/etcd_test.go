package master

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gw/conf"
	"gw/master/store"
)

func TestReloadKeepsTheDeployment(t *testing.T) {
	old := conf.Default()
	same := conf.Default()
	if err := staticChangeAllowed(old, same); err != nil {
		t.Fatalf("an unchanged deployment refused: %v", err)
	}
	changed := conf.Default()
	changed.Deployment.ConfigProvider = conf.ProviderEtcd
	err := staticChangeAllowed(old, changed)
	if err == nil || !strings.Contains(err.Error(), "config_provider local → etcd") {
		t.Fatalf("a changed config_provider: %v, want it refused by name", err)
	}
}

// The node id is made once and read back the same; the cached copy is read back whole,
// and one of another prefix is not used.
func TestNodeIDAndCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, nodeIDFile)
	first, err := nodeID(path)
	if err != nil || len(first) != 32 {
		t.Fatalf("nodeID: %q %v", first, err)
	}
	if again, _ := nodeID(path); again != first {
		t.Fatalf("node id changed across calls: %s then %s", first, again)
	}

	st := store.OpenMemory()
	if _, _, err := st.Put(store.Routes, "1", []byte(`{"id":"1","uri":"/a","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)); err != nil {
		t.Fatal(err)
	}
	m := &Master{store: st, etcd: &etcdState{cachePath: filepath.Join(dir, cacheFile), prefix: "/apisix"}}
	m.writeCache()
	objects, revision, ok, err := readCache(m.etcd.cachePath, "/apisix")
	if err != nil || !ok || revision != st.Revision() || len(objects) != 1 || objects[0].ID != "1" {
		t.Fatalf("readCache: %v %d %v %v", objects, revision, ok, err)
	}
	if info, _ := os.Stat(m.etcd.cachePath); info.Mode().Perm() != 0o600 {
		t.Fatalf("cache mode %v, want 0600: it holds consumers' credentials and ssl keys", info.Mode().Perm())
	}
	if _, _, ok, err := readCache(m.etcd.cachePath, "/other"); ok || err == nil {
		t.Fatal("a cache of another prefix was used")
	}
}
