package pluginconf

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMembersAccepts(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []Member // style left out: checked separately
	}{
		{"empty object", `{}`, nil},
		{"white space around", " \n{ }\n", nil},
		{"document order kept", `{"b": 1, "a": 2}`, []Member{{Name: "b", Value: json.RawMessage(`1`)}, {Name: "a", Value: json.RawMessage(`2`)}}},
		{"values as written", `{"o": {"x" : [1, 2]}, "s": "a b"}`, []Member{{Name: "o", Value: json.RawMessage(`{"x" : [1, 2]}`)}, {Name: "s", Value: json.RawMessage(`"a b"`)}}},
		{"escaped name unescaped", `{"\u0061": null}`, []Member{{Name: "a", Value: json.RawMessage(`null`)}}},
		{"same name nested is fine", `{"a": {"a": 1}}`, []Member{{Name: "a", Value: json.RawMessage(`{"a": 1}`)}}},
	}
	for _, style := range []*Style{Compact, Verbatim} {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := style.Members(json.RawMessage(tt.json))
				if err != nil {
					t.Fatalf("Members(%s): %v", tt.json, err)
				}
				for i := range got {
					if got[i].style != style {
						t.Errorf("member %d carries another style", i)
					}
					got[i].style = nil
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("Members(%s) = %+v, want %+v", tt.json, got, tt.want)
				}
			})
		}
	}
}

func TestMembersRejects(t *testing.T) {
	tests := []struct {
		name                  string
		json                  string
		wantCompact, wantVerb string // the whole message in each style
	}{
		{"empty input", ``, `configuration must be a JSON object, got nothing`, `configuration must be a JSON object, got `},
		{"null", `null`, `configuration must be a JSON object, got null`, `configuration must be a JSON object, got null`},
		{"array", `[1, 2]`, `configuration must be a JSON object, got [1,2]`, `configuration must be a JSON object, got [1, 2]`},
		{"string", `"x"`, `configuration must be a JSON object, got "x"`, `configuration must be a JSON object, got "x"`},
		{"not JSON", `x`, `configuration must be a JSON object, got x`, `configuration must be a JSON object, got x`},
		{"end of input", `{"a": 1,`, `invalid JSON: EOF`, `invalid JSON: EOF`},
		{"no value", `{"a"}`, `invalid JSON: expected colon after object key`, `invalid JSON: expected colon after object key`},
		{"name not a string", `{1: 2}`, `invalid JSON: invalid character '1'`, `invalid JSON: invalid character '1'`},
		{"broken value", `{"a": tru}`, `invalid JSON: invalid character '}' in literal true (expecting 'e')`,
			`invalid JSON: invalid character '}' in literal true (expecting 'e')`},
		{"unclosed", `{"a": 1`, `invalid JSON: EOF`, `invalid JSON: EOF`},
		{"trailing object", `{} {}`, `invalid JSON: data after the object`, `invalid JSON: data after the object`},
		{"trailing junk", `{}x`, `invalid JSON: data after the object`, `invalid JSON: data after the object`},
		{"repeated name", `{"a": 1, "b": 2, "a": 3}`, `a: appears twice; keep one`, `a: appears twice; keep one`},
		{"repeated after escaping", `{"a": 1, "\u0061": 2}`, `a: appears twice; keep one`, `a: appears twice; keep one`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for style, want := range map[*Style]string{Compact: tt.wantCompact, Verbatim: tt.wantVerb} {
				got, err := style.Members(json.RawMessage(tt.json))
				if err == nil {
					t.Fatalf("Members(%s) = %+v, want error %q", tt.json, got, want)
				}
				if err.Error() != want {
					t.Fatalf("Members(%s)\n got error %q\nwant       %q", tt.json, err, want)
				}
			}
		})
	}
}

// Each hands members over as they are read, so a member's error comes before anything
// wrong later in the document; Members reads the whole object first.
func TestEachStopsAtTheFirstError(t *testing.T) {
	errField := errors.New("field refused")
	tests := []struct {
		name        string
		json        string
		wantEach    error  // nil: compare messages instead
		wantMembers string // Members' whole message
		wantSeen    int    // members Each handed over
	}{
		{"refused before a repeat", `{"a": 1, "a": 2}`, errField, `a: appears twice; keep one`, 1},
		{"refused before a syntax error", `{"a": 1, "b"}`, errField, `invalid JSON: expected colon after object key`, 1},
		{"refused before trailing data", `{"a": 1} x`, errField, `invalid JSON: data after the object`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := 0
			err := Compact.Each(json.RawMessage(tt.json), func(m Member) error {
				seen++
				return errField
			})
			if err != tt.wantEach || seen != tt.wantSeen {
				t.Errorf("Each = %v after %d member(s), want %v after %d", err, seen, tt.wantEach, tt.wantSeen)
			}
			if _, err := Compact.Members(json.RawMessage(tt.json)); err == nil || err.Error() != tt.wantMembers {
				t.Errorf("Members error = %v, want %q", err, tt.wantMembers)
			}
		})
	}
	t.Run("every member when none is refused", func(t *testing.T) {
		var names []string
		err := Verbatim.Each(json.RawMessage(`{"x": 1, "y": {}, "z": []}`), func(m Member) error {
			names = append(names, m.Name)
			return nil
		})
		if err != nil || strings.Join(names, ",") != "x,y,z" {
			t.Errorf("Each = %v, saw %v; want nil, x,y,z", err, names)
		}
	})
}

func TestValidateWith(t *testing.T) {
	errBad := errors.New("bad")
	parse := func(raw json.RawMessage) (*int, error) {
		if string(raw) != "ok" {
			return nil, errBad
		}
		n := 1
		return &n, nil
	}
	validate := ValidateWith(parse)
	if err := validate(json.RawMessage("ok")); err != nil {
		t.Errorf("validate(ok) = %v", err)
	}
	if err := validate(json.RawMessage("no")); err != errBad {
		t.Errorf("validate(no) = %v, want parse's error", err)
	}
}

// FuzzMembers: no input panics; what Members accepts has unique names, values that are
// valid JSON, and the same members Each hands over.
func FuzzMembers(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a": 1, "b": [true]}`, `{"a": 1, "a": 2}`, `[`, `null`, `{"a": {"a": 1}} x`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		members, err := Compact.Members(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range members {
			if seen[m.Name] || !json.Valid(m.Value) {
				t.Fatalf("Members(%q) accepted %+v", data, members)
			}
			seen[m.Name] = true
		}
		var each []Member
		if err := Compact.Each(data, func(m Member) error { each = append(each, m); return nil }); err != nil || !reflect.DeepEqual(each, members) {
			t.Fatalf("Each(%q) = %+v, %v; Members gave %+v", data, each, err, members)
		}
	})
}

func BenchmarkMembers(b *testing.B) {
	raw := json.RawMessage(`{"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compact.Members(raw); err != nil {
			b.Fatal(err)
		}
	}
}
