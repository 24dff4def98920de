package master

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"gw/conf"
	"gw/internal/errlog"
	_ "gw/plugins/all"
)

// What the master hands workers holds the values of its environment, never a reference
// that has one; a reference without a value is logged once, however often it is published.
func TestSetSnapshotResolvesSecretsForWorkers(t *testing.T) {
	t.Setenv("GW_TEST_SECRET_KEY", "from-the-environment")
	var log bytes.Buffer
	m := &Master{log: errlog.New(&log, "master")}
	snap := &conf.Snapshot{Version: 3, Consumers: []conf.Consumer{
		{Username: "jack", Plugins: map[string]json.RawMessage{"key-auth": json.RawMessage(`{"key":"$env://GW_TEST_SECRET_KEY"}`)}},
		{Username: "jill", Plugins: map[string]json.RawMessage{"key-auth": json.RawMessage(`{"key":"$env://GW_TEST_SECRET_UNSET"}`)}},
	}}
	for range 2 {
		if err := m.setSnapshot(snap); err != nil {
			t.Fatal(err)
		}
	}
	var sent conf.Snapshot
	if err := json.Unmarshal(m.snapshot, &sent); err != nil {
		t.Fatal(err)
	}
	if got := string(sent.Consumers[0].Plugins["key-auth"]); got != `{"key":"from-the-environment"}` {
		t.Errorf("workers get jack's key-auth %s, want the variable's value", got)
	}
	if got := string(sent.Consumers[1].Plugins["key-auth"]); got != `{"key":"$env://GW_TEST_SECRET_UNSET"}` {
		t.Errorf("workers get jill's key-auth %s, want the unresolved reference (which matches nothing)", got)
	}
	if got := string(snap.Consumers[0].Plugins["key-auth"]); got != `{"key":"$env://GW_TEST_SECRET_KEY"}` {
		t.Errorf("setSnapshot changed the store's snapshot to %s", got)
	}
	if n := strings.Count(log.String(), "GW_TEST_SECRET_UNSET"); n != 1 ||
		!strings.Contains(log.String(), `consumer "jill": key-auth.key: $env://GW_TEST_SECRET_UNSET has no value`) {
		t.Errorf("log (%d mentions, want 1):\n%s", n, log.String())
	}
	if strings.Contains(log.String(), "from-the-environment") {
		t.Error("the log shows a secret's value")
	}
}
