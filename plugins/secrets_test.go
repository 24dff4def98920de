package plugins

import (
	"encoding/json"
	"reflect"
	"testing"

	"gw/conf"
)

func TestResolveSecrets(t *testing.T) {
	Register(&testAuth{testPlugin: testPlugin{name: "test-secret-auth"}, secrets: []string{"key", "password"}})
	env := map[string]string{"KEY": "from-env", "CREDS": `{"pw":"p4ss"}`, "EMPTY": ""}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }

	consumer := func(name, config string) conf.Consumer {
		return conf.Consumer{Username: name, Plugins: map[string]json.RawMessage{"test-secret-auth": json.RawMessage(config)}}
	}
	cases := []struct {
		name       string
		config     string
		want       string // the configuration workers get; "" when unchanged
		unresolved []string
	}{
		{"plain values", `{"key":"k","password":"p"}`, "", nil},
		{"env reference", `{"key":"$env://KEY"}`, `{"key":"from-env"}`, nil},
		{"upper-case prefix", `{"key":"$ENV://KEY"}`, `{"key":"from-env"}`, nil},
		{"member of a JSON value", `{"key":"k","password":"$env://CREDS/pw"}`, `{"key":"k","password":"p4ss"}`, nil},
		{"two references", `{"key":"$env://KEY","password":"$env://CREDS/pw"}`, `{"key":"from-env","password":"p4ss"}`, nil},
		{"members not listed are left alone", `{"key":"k","other":"$env://KEY"}`, "", nil},
		{"unset stays a reference", `{"key":"$env://UNSET"}`, "",
			[]string{`consumer "c": test-secret-auth.key: $env://UNSET has no value (unset, empty, or without that member)`}},
		{"empty stays a reference", `{"key":"$env://EMPTY"}`, "",
			[]string{`consumer "c": test-secret-auth.key: $env://EMPTY has no value (unset, empty, or without that member)`}},
		{"one resolved, one not", `{"key":"$env://KEY","password":"$env://CREDS/nope"}`, `{"key":"from-env","password":"$env://CREDS/nope"}`,
			[]string{`consumer "c": test-secret-auth.password: $env://CREDS/nope has no value (unset, empty, or without that member)`}},
		{"secret manager", `{"key":"$secret://vault/1/k"}`, "",
			[]string{`consumer "c": test-secret-auth.key: ` + "secret managers ($secret://) are not supported yet; use $env://NAME to take the value from the gateway's environment"}},
		{"not a string", `{"key":5}`, "", nil},
		{"not an object", `"$env://KEY"`, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := &conf.Snapshot{Version: 7, Consumers: []conf.Consumer{
				{Username: "first", Plugins: map[string]json.RawMessage{"other": json.RawMessage(`{"key":"$env://KEY"}`)}},
				consumer("c", tc.config),
			}}
			before := deepCopy(t, snap)
			got, unresolved := ResolveSecrets(snap, lookup)
			if !reflect.DeepEqual(snap, before) {
				t.Errorf("ResolveSecrets changed its input")
			}
			if !reflect.DeepEqual(unresolved, tc.unresolved) {
				t.Errorf("unresolved = %q, want %q", unresolved, tc.unresolved)
			}
			if tc.want == "" {
				if got != snap {
					t.Errorf("nothing to resolve, yet a copy was made")
				}
				return
			}
			if got.Version != 7 || len(got.Consumers) != 2 || string(got.Consumers[0].Plugins["other"]) != `{"key":"$env://KEY"}` {
				t.Errorf("the rest of the snapshot changed: %+v", got)
			}
			if raw := got.Consumers[1].Plugins["test-secret-auth"]; !jsonEqual(raw, tc.want) {
				t.Errorf("workers get %s, want %s", raw, tc.want)
			}
		})
	}
}

func deepCopy(t *testing.T, snap *conf.Snapshot) *conf.Snapshot {
	t.Helper()
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var c conf.Snapshot
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func jsonEqual(a json.RawMessage, b string) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal([]byte(b), &vb) == nil && reflect.DeepEqual(va, vb)
}
