package standalone

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gw/master/store"
)

func TestParse(t *testing.T) {
	file := `routes:
  - uri: /hello
    upstream_id: 1
  - id: r2
    uri: /two
    upstream:
      nodes:
        "127.0.0.1:1980": 1
upstreams:
  - id: 1
    nodes: {"127.0.0.1:1980": 1}
consumers:
  - username: jack
    plugins: {key-auth: {key: k}}
#END
`
	objs, err := Parse([]byte(file), FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, string(o.Kind)+"/"+o.ID)
		var v map[string]any
		if err := json.Unmarshal(o.Value, &v); err != nil {
			t.Fatalf("%s/%s: %v", o.Kind, o.ID, err)
		}
		if o.Kind != store.Consumers && v["id"] != o.ID {
			t.Errorf("%s/%s: value's id %v", o.Kind, o.ID, v["id"])
		}
	}
	want := "routes/arr_1 routes/r2 upstreams/1 consumers/jack"
	if strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, file, format, want string }{
		{"no end", "routes: []\n", FormatYAML, "#END"},
		{"end not last", "#END\nroutes: []\n", FormatYAML, "#END"},
		{"bad yaml", "routes: [\n#END\n", FormatYAML, "not valid YAML"},
		{"not a mapping", "- a\n#END\n", FormatYAML, "must be a mapping"},
		{"unknown kind", "rutes: []\n#END\n", FormatYAML, `unknown key "rutes"`},
		{"unsupported", "stream_routes: []\n#END\n", FormatYAML, "not supported yet"},
		{"metadata without its plugin", "plugin_metadata: [{log_format: {host: $host}}]\n#END\n", FormatYAML, "id is required: it is the name of the plugin"},
		{"not a list", "routes: {uri: /a}\n#END\n", FormatYAML, "must be a list"},
		{"item not object", "routes: [1]\n#END\n", FormatYAML, "must be an object"},
		{"duplicate id", "routes: [{id: 1, uri: /a}, {id: \"1\", uri: /b}]\n#END\n", FormatYAML, `id "1" is routes[0]'s too`},
		{"bad id", "routes: [{id: \"a b\", uri: /a}]\n#END\n", FormatYAML, "not a valid id"},
		{"no username", "consumers: [{plugins: {}}]\n#END\n", FormatYAML, "username is required"},
		{"bad json", `{"routes": [`, FormatJSON, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), tc.format)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte("routes: []\n"), FormatYAML); !errors.Is(err, ErrNotEnded) {
		t.Errorf("a file without #END: %v, want ErrNotEnded", err)
	}
}

func TestParseEmptyAndJSON(t *testing.T) {
	if objs, err := Parse([]byte("#END\n"), FormatYAML); err != nil || len(objs) != 0 {
		t.Errorf("only #END: %v %v", objs, err)
	}
	objs, err := Parse([]byte(`{"routes":[{"id":"1","uri":"/a","upstream":{"nodes":{"127.0.0.1:80":1}}}]}`), FormatJSON)
	if err != nil || len(objs) != 1 || objs[0].ID != "1" {
		t.Fatalf("%v %v", objs, err)
	}
}

// TestEncodeRoundTrip writes stored objects and reads them back: same ids, same values
// but for the store's own timestamps.
func TestEncodeRoundTrip(t *testing.T) {
	stored := []store.Object{
		{Kind: store.Upstreams, ID: "1", Value: json.RawMessage(`{"id":"1","nodes":{"127.0.0.1:1980":1},"type":"roundrobin","create_time":1,"update_time":2}`)},
		{Kind: store.Routes, ID: "7", Value: json.RawMessage(`{"id":"7","uri":"/a","upstream_id":"1","plugins":{"prometheus":{}},"hosts":[],"priority":0}`)},
		{Kind: store.Consumers, ID: "jack", Value: json.RawMessage(`{"username":"jack","plugins":{"key-auth":{"key":"123"}}}`)},
		{Kind: store.SSLs, ID: "s", Value: json.RawMessage(`{"id":"s","cert":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n","snis":["true","a.test"]}`)},
		{Kind: store.PluginMetadata, ID: "http-logger", Value: json.RawMessage(`{"log_format":{"host":"$host"}}`)},
	}
	data, err := Encode(stored, store.Kinds())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(data), "#END\n") || strings.Contains(string(data), "create_time") {
		t.Fatalf("file:\n%s", data)
	}
	objs, err := Parse(data, FormatYAML)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(objs) != 5 || !strings.Contains(string(data), "  - id: \"1\"\n") || !strings.Contains(string(data), "cert: |") ||
		!strings.Contains(string(data), "plugin_metadata:\n  - id: http-logger\n    log_format:\n") {
		t.Fatalf("read back %d objects:\n%s", len(objs), data)
	}
	want := map[string]string{
		"upstreams/1":    `{"id":"1","nodes":{"127.0.0.1:1980":1},"type":"roundrobin"}`,
		"routes/7":       `{"hosts":[],"id":"7","plugins":{"prometheus":{}},"priority":0,"upstream_id":"1","uri":"/a"}`,
		"consumers/jack": `{"plugins":{"key-auth":{"key":"123"}},"username":"jack"}`,
		"ssls/s":         `{"cert":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n","id":"s","snis":["true","a.test"]}`,
		// The plugin's name is the object's id, not a member of its value.
		"plugin_metadata/http-logger": `{"log_format":{"host":"$host"}}`,
	}
	for _, o := range objs {
		if w := want[string(o.Kind)+"/"+o.ID]; string(o.Value) != w {
			t.Errorf("%s/%s: %s, want %s", o.Kind, o.ID, o.Value, w)
		}
	}
}

// FuzzParse: no file makes Parse panic, and every object it returns has a valid id and a
// JSON value.
func FuzzParse(f *testing.F) {
	f.Add([]byte("routes:\n  - uri: /a\n    upstream: {nodes: {\"127.0.0.1:80\": 1}}\n#END\n"), false)
	f.Add([]byte("consumers: [{username: jack}]\nupstreams: [{id: 1, nodes: {1.2.3.4:80: 1}}]\n#END\n"), false)
	f.Add([]byte(`{"routes":[{"id":1,"uri":"/a"}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		format := FormatYAML
		if asJSON {
			format = FormatJSON
		}
		objs, err := Parse(data, format)
		if err != nil {
			return
		}
		for _, o := range objs {
			if !store.ValidID(o.ID) || !json.Valid(o.Value) {
				t.Fatalf("%s/%s: %s", o.Kind, o.ID, o.Value)
			}
		}
	})
}
