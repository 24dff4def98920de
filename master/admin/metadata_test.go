package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"gw/plugins"
	_ "gw/plugins/all"
)

// examplePlugin is APISIX's example-plugin as t/admin/plugin-metadata.t uses it: its
// metadata needs an integer ikey and takes a string skey.
type examplePlugin struct{}

func (examplePlugin) Name() string                                     { return "example-plugin" }
func (examplePlugin) Priority() int                                    { return 0 }
func (examplePlugin) Validate(json.RawMessage) error                   { return nil }
func (examplePlugin) Build(json.RawMessage, *plugins.Env) (any, error) { return nil, nil }
func (examplePlugin) MetadataSchema() []byte                           { return []byte(`{"type":"object"}`) }
func (examplePlugin) Schema() []byte                                   { return []byte(`{"type":"object"}`) }
func (examplePlugin) ValidateMetadata(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	for name, value := range m {
		switch name {
		case "ikey":
			var i int
			if json.Unmarshal(value, &i) != nil {
				return fmt.Errorf(`property "ikey" validation failed: wrong type: expected integer, got %s`, value)
			}
		case "skey":
		case "create_time", "update_time":
		default:
			return fmt.Errorf("additional properties forbidden, found %s", name)
		}
	}
	if _, ok := m["ikey"]; !ok {
		return errors.New(`property "ikey" is required`)
	}
	return nil
}

func init() { plugins.Register(examplePlugin{}) }

// TestPluginMetadata is t/admin/plugin-metadata.t's answers: PUT, GET and DELETE by plugin
// name, the value holding no id, APISIX's messages for what it refuses.
func TestPluginMetadata(t *testing.T) {
	f := newFixture(t)
	const path = "/apisix/admin/plugin_metadata/example-plugin"
	expect(t, f.call("PUT", path, `{"skey":"val","ikey":1}`), 201,
		`{"key":"/apisix/plugin_metadata/example-plugin","value":{"skey":"val","ikey":1,"create_time":1700000000,"update_time":1700000000}}`)
	f.clock = f.clock.Add(5e9)
	expect(t, f.call("PUT", path, `{"skey":"val2","ikey":2}`), 200,
		`{"key":"/apisix/plugin_metadata/example-plugin","value":{"skey":"val2","ikey":2,"create_time":1700000000,"update_time":1700000005}}`)
	w := f.call("GET", path, "")
	expect(t, w, 200, "")
	var got item
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Key != "/apisix/plugin_metadata/example-plugin" ||
		!jsonEqual(string(got.Value), `{"skey":"val2","ikey":2,"create_time":1700000000,"update_time":1700000005}`) {
		t.Errorf("GET = %s (%v)", w.Body, err)
	}
	if got := f.pub.last().MetadataOf("example-plugin"); !strings.Contains(string(got), `"ikey":2`) {
		t.Errorf("published metadata = %s, want the second PUT's", got)
	}
	list := f.call("GET", "/apisix/admin/plugin_metadata", "")
	if !strings.Contains(list.Body.String(), `"total":1`) {
		t.Errorf("list = %s", list.Body)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/apisix/admin/plugin_metadata", `{"k":"v"}`, 400, `{"error_msg":"missing plugin name"}`},
		{"PUT", "/apisix/admin/plugin_metadata/test", `{"k":"v"}`, 400, `{"error_msg":"invalid plugin name"}`},
		{"PUT", "/apisix/admin/plugin_metadata/key-auth", `{"k":"v"}`, 400, `{"error_msg":"no metadata schema for plugin key-auth"}`},
		{"PUT", path, `{"skey":"val"}`, 400, `{"error_msg":"invalid configuration: property \"ikey\" is required"}`},
		{"PUT", path, `{"ikey":"x"}`, 400, `{"error_msg":"invalid configuration: property \"ikey\" validation failed: wrong type: expected integer, got \"x\""}`},
		{"PUT", path, `[1]`, 400, `{"error_msg":"invalid configuration: the body must be a JSON object"}`},
		{"PUT", path, ``, 400, `{"error_msg":"missing configurations"}`},
		{"POST", "/apisix/admin/plugin_metadata", `{"ikey":1}`, 405, "{\"error_msg\":\"not supported `POST` method for metadata\"}"},
		{"PATCH", path, `{"ikey":1}`, 405, "{\"error_msg\":\"not supported `PATCH` method for metadata\"}"},
		{"DELETE", "/apisix/admin/plugin_metadata", ``, 400, `{"error_msg":"missing metadata key"}`},
		{"DELETE", "/apisix/admin/plugin_metadata/not_found", ``, 404, `{"message":"Key not found"}`},
	} {
		t.Run(c.method+" "+c.path+" "+c.body, func(t *testing.T) {
			expect(t, f.call(c.method, c.path, c.body), c.status, c.want)
		})
	}
	expect(t, f.call("DELETE", path, ""), 200, `{"deleted":"1","key":"/apisix/plugin_metadata/example-plugin"}`)
	expect(t, f.call("GET", path, ""), 404, `{"message":"Key not found"}`)
	if got := f.pub.last().MetadataOf("example-plugin"); got != nil {
		t.Errorf("published metadata after DELETE = %s, want none", got)
	}
}

// TestPluginMetadataBackup: an export names each plugin's metadata, which the value does
// not, and imports back as it was.
func TestPluginMetadataBackup(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"ikey":1}`), 201, "")
	backup := f.h.Export()
	if !strings.Contains(string(backup), `"id": "example-plugin"`) {
		t.Fatalf("export = %s, want the plugin named", backup)
	}
	g := newFixture(t)
	if _, err := g.h.Import(t.Context(), backup, "test", "127.0.0.1"); err != nil {
		t.Fatalf("import: %v", err)
	}
	obj, ok := g.store.Get("plugin_metadata", "example-plugin")
	if !ok || strings.Contains(string(obj.Value), `"id"`) || !strings.Contains(string(obj.Value), `"ikey":1`) {
		t.Errorf("imported = %s, %v; want the value without an id", obj.Value, ok)
	}
}

// GET /apisix/admin/plugins/{name}?schema_type=metadata is the metadata's schema, and
// "not found schema" for a plugin without metadata, as APISIX.
func TestPluginMetadataSchema(t *testing.T) {
	f := newFixture(t)
	p, _ := plugins.Lookup("http-logger")
	w := f.call("GET", "/apisix/admin/plugins/http-logger?schema_type=metadata", "")
	if w.Code != 200 || !jsonEqual(w.Body.String(), string(p.(plugins.MetadataOwner).MetadataSchema())) {
		t.Errorf("http-logger's metadata schema: %d %s", w.Code, w.Body)
	}
	expect(t, f.call("GET", "/apisix/admin/plugins/key-auth?schema_type=metadata", ""), 400, `{"error_msg":"not found schema"}`)
}
