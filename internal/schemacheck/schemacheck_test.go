package schemacheck

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	const schema = `{
		"type": "object",
		"title": "work with route or service object",
		"properties": {
			"count": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807},
			"rate": {"type": "number", "exclusiveMinimum": 0},
			"mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
			"name": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]+$"},
			"list": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": ["string", "number"]}},
			"either": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
			"one": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
			"free": {},
			"inner": {"type": "object", "minProperties": 1, "additionalProperties": false, "properties": {"x": {"type": "boolean"}}},
			"no_ref": {"type": "string", "not": {"pattern": "^\\$"}}
		},
		"patternProperties": {"^x_": {"type": "boolean"}},
		"required": ["count"],
		"additionalProperties": false
	}`
	cases := []struct {
		value string
		want  string // "" to match, else part of the error
	}{
		{`{"count": 1}`, ""},
		{`{"count": 60.0}`, ""},
		{`{"count": 9223372036854775807}`, ""},
		{`{"count": 9223372036854775808}`, "maximum"},
		{`{"count": 0}`, "minimum"},
		{`{"count": 1.5}`, "type"},
		{`{"count": "1"}`, "type"},
		{`{}`, "count is required"},
		{`[]`, "type"},
		{`{"count": 1, "rate": 0}`, "exclusiveMinimum"},
		{`{"count": 1, "rate": 0.1}`, ""},
		{`{"count": 1, "mode": "b"}`, ""},
		{`{"count": 1, "mode": "c"}`, "one of"},
		{`{"count": 1, "name": ""}`, "at least 1"},
		{`{"count": 1, "name": "abcd"}`, "at most 3"},
		{`{"count": 1, "name": "aB"}`, "must match"},
		{`{"count": 1, "list": []}`, "at least 1 items"},
		{`{"count": 1, "list": ["a", 2]}`, ""},
		{`{"count": 1, "list": ["a", 2, 3]}`, "at most 2 items"},
		{`{"count": 1, "list": [true]}`, "list[0]"},
		{`{"count": 1, "either": true}`, ""},
		{`{"count": 1, "either": 1}`, "none of anyOf"},
		{`{"count": 1, "one": 1.5}`, ""},
		{`{"count": 1, "one": 1}`, "not one"},
		{`{"count": 1, "free": {"anything": [1]}}`, ""},
		{`{"count": 1, "inner": {}}`, "at least 1 members"},
		{`{"count": 1, "inner": {"y": true}}`, "inner.y: unknown member"},
		{`{"count": 1, "x_on": true}`, ""},
		{`{"count": 1, "x_on": 1}`, "x_on"},
		{`{"count": 1, "other": 1}`, "other: unknown member"},
		{`{"count": 1, "no_ref": "$env://A"}`, "must not match"},
	}
	for _, tc := range cases {
		err := Check([]byte(schema), []byte(tc.value))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.value, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.value, err, tc.want)
		}
	}
	if err := Lint([]byte(schema)); err != nil {
		t.Errorf("Lint: %v", err)
	}
}

func TestUnknownKeywordsAreErrors(t *testing.T) {
	for _, schema := range []string{
		`{"type": "object", "dependencies": {}}`,
		`{"properties": {"a": {"type": "string", "format": "ipv4"}}}`,
		`{"anyOf": [{"exclusiveMaximum": 3}]}`,
	} {
		if err := Lint([]byte(schema)); err == nil || !strings.Contains(err.Error(), "does not read the keyword") {
			t.Errorf("Lint(%s) = %v", schema, err)
		}
	}
	if err := Check([]byte(`{"type": "object", "dependencies": {}}`), []byte(`{}`)); err == nil {
		t.Error("Check read an unknown keyword as no constraint")
	}
	if err := Lint([]byte(`{"type": "integer", "minimum": 1, "default": 0}`)); err == nil || !strings.Contains(err.Error(), "default") {
		t.Errorf("Lint missed a default its schema refuses: %v", err)
	}
	if err := Lint([]byte(`{"pattern": "(?=a)"}`)); err == nil {
		t.Error("Lint missed a pattern RE2 cannot compile")
	}
}
