package conf

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodePluginConfigAccepts(t *testing.T) {
	cases := map[string]accepted[PluginConfig]{
		"id and plugins":  {`{"id":"1","plugins":{}}`, PluginConfig{ID: "1", Plugins: map[string]json.RawMessage{}}},
		"integer id":      {`{"id":7,"plugins":{}}`, PluginConfig{ID: "7", Plugins: map[string]json.RawMessage{}}},
		"plugins compact": {`{"id":"a","plugins":{"p":{ "x" : 1 }}}`, PluginConfig{ID: "a", Plugins: map[string]json.RawMessage{"p": json.RawMessage(`{"x":1}`)}}},
		"all fields": {
			`{"id":"pc-1","name":"n","desc":"d","labels":{"env":"prod"},"plugins":{"key-auth":{}},"create_time":1,"update_time":2}`,
			PluginConfig{ID: "pc-1", Name: "n", Desc: "d", Labels: map[string]string{"env": "prod"},
				Plugins: map[string]json.RawMessage{"key-auth": json.RawMessage(`{}`)}, CreateTime: 1, UpdateTime: 2},
		},
	}
	testAccepts(t, DecodePluginConfig, cases)
}

func TestDecodePluginConfigRejects(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"not JSON":           {`{"id":`, "malformed JSON"},
		"not an object":      {`[]`, "wrong type: expected object"},
		"no plugins":         {`{"id":"1"}`, `property "plugins" validation failed: is required`},
		"no id":              {`{"plugins":{}}`, `property "id" validation failed: is required`},
		"plugins not object": {`{"id":"1","plugins":[]}`, `property "plugins" validation failed: wrong type`},
		"bad id":             {`{"id":"a/b","plugins":{}}`, `property "id" validation failed`},
		"empty name":         {`{"id":"1","plugins":{},"name":""}`, `property "name" validation failed`},
		"desc too long":      {`{"id":"1","plugins":{},"desc":"` + strings.Repeat("d", 257) + `"}`, `property "desc" validation failed`},
		"label with space":   {`{"id":"1","plugins":{},"labels":{"k":"a b"}}`, `property "labels.k" validation failed`},
		"unknown field":      {`{"id":"1","plugins":{},"uri":"/"}`, `property "uri" validation failed: unknown field`},
		"create_time string": {`{"id":"1","plugins":{},"create_time":"1"}`, `property "create_time" validation failed`},
	}
	testRejects(t, DecodePluginConfig, cases)
}

// accepted is a body a decoder accepts and the object it must decode to.
type accepted[T any] struct {
	body string
	want T
}

// testAccepts checks that each body decodes to its object, and that the object marshals
// back to JSON that decodes to the same.
func testAccepts[T any](t *testing.T, decode func([]byte) (*T, error), cases map[string]accepted[T]) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decode([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
			again, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := decode(again); err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("round trip of %s: %+v, %v", again, back, err)
			}
		})
	}
}

// testRejects checks that each body is refused with an error containing its text.
func testRejects[T any](t *testing.T, decode func([]byte) (*T, error), cases map[string]struct{ body, want string }) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decode([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
