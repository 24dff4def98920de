package prometheus

import (
	"encoding/json"
	"reflect"
	"testing"

	"gw/plugins"
)

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Config
	}{
		{"seed: empty object", `{}`, Config{}},
		{"whitespace", " { }\n", Config{}},
		{"prefer_name true", `{"prefer_name": true}`, Config{PreferName: true}},
		{"prefer_name false", `{"prefer_name": false}`, Config{}},
		{"disable", `{"disable": true}`, Config{Disable: true}},
		{"_meta", `{"_meta": {"priority": 1, "filter": []}, "prefer_name": true}`, Config{PreferName: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(json.RawMessage(tt.json))
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.json, err)
			}
			if *got != tt.want {
				t.Fatalf("Parse(%s) = %+v, want %+v", tt.json, *got, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string
	}{
		{"empty input", ``, `configuration must be a JSON object, got nothing`},
		{"null", `null`, `configuration must be a JSON object, got null`},
		{"array", `[]`, `configuration must be a JSON object, got []`},
		{"broken JSON", `{"prefer_name": true`, `invalid JSON: EOF`},
		{"trailing data", `{}x`, `invalid JSON: data after the object`},
		{"unknown field", `{"prefer_names": true}`, `prefer_names: unknown field`},
		{"APISIX plugin_attr key on a route", `{"export_uri": "/metrics"}`, `export_uri: unknown field`},
		{"prefer_name string", `{"prefer_name": "true"}`, `prefer_name: must be true or false, got "true"`},
		{"prefer_name number", `{"prefer_name": 1}`, `prefer_name: must be true or false, got 1`},
		{"prefer_name null", `{"prefer_name": null}`, `prefer_name: must be true or false, got null`},
		{"repeated field", `{"prefer_name": true, "prefer_name": false}`, `prefer_name: appears twice; keep one`},
		{"disable string", `{"disable": "no"}`, `disable: must be true or false, got "no"`},
		{"_meta not an object", `{"_meta": "x"}`, `_meta: must be an object, got "x"`},
		{"long value cut short", `{"prefer_name": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`,
			`prefer_name: must be true or false, got "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(json.RawMessage(tt.json))
			if err == nil {
				t.Fatalf("Parse(%s) = %+v, want error %q", tt.json, *c, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("Parse(%s)\n got error %q\nwant       %q", tt.json, err, tt.want)
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	p, ok := plugins.Lookup("prometheus")
	if !ok {
		t.Fatal("prometheus is not registered")
	}
	if p.Priority() != 500 {
		t.Errorf("priority = %d, want 500 as in APISIX", p.Priority())
	}
	if err := p.Validate(json.RawMessage(`{}`)); err != nil {
		t.Errorf("Validate({}) = %v", err)
	}
	if err := p.Validate(json.RawMessage(`{"x": 1}`)); err == nil {
		t.Error(`Validate({"x": 1}) = nil, want an error`)
	}
}

// FuzzParse checks that no input panics and that what Parse accepts survives a round trip
// through its own JSON form.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{`{}`, `{"prefer_name": true}`, `{"_meta": {}}`, `[`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip of %s: got %+v, %v; want %+v", out, again, err, *c)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	raw := json.RawMessage(`{"prefer_name": true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}
