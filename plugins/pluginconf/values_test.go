package pluginconf

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// member reads {"f": value} in style and returns its one member, so every case goes
// through Members as a plugin's configuration does.
func member(t *testing.T, style *Style, value string) Member {
	t.Helper()
	members, err := style.Members(json.RawMessage(`{"f": ` + value + `}`))
	if err != nil || len(members) != 1 {
		t.Fatalf("Members of %s = %v, %v", value, members, err)
	}
	return members[0]
}

// check compares a reader's result with want, or its whole message with wantErr.
func check[T comparable](t *testing.T, value string, got T, err error, want T, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("%s: error %v, want %v", value, err, want)
	case wantErr == "" && got != want:
		t.Errorf("%s: got %v, want %v", value, got, want)
	case wantErr != "" && (err == nil || err.Error() != wantErr):
		t.Errorf("%s: got %v, %v; want error %q", value, got, err, wantErr)
	}
}

func TestShow(t *testing.T) {
	long := `"` + strings.Repeat("a", 50) + `"`
	accents := `"` + strings.Repeat("é", 30) + `"` // 2 bytes each: byte 40 is inside one
	tests := []struct {
		name, value, compact, verbatim string
	}{
		{"empty", ``, `nothing`, ``},
		{"white space only", " \n", `nothing`, " \n"},
		{"short", `1`, `1`, `1`},
		{"white space inside", `{"a" : [1, 2]}`, `{"a":[1,2]}`, `{"a" : [1, 2]}`},
		{"white space around", "  true\n", `true`, "  true\n"},
		{"not JSON is trimmed", ` {x `, `{x`, ` {x `},
		{"exactly 40 bytes", `"` + strings.Repeat("b", 38) + `"`, `"` + strings.Repeat("b", 38) + `"`, `"` + strings.Repeat("b", 38) + `"`},
		{"long", long, long[:40] + "...", long[:40] + "..."},
		{"long after compacting", `[` + strings.Repeat("1, ", 20) + `1]`, `[` + strings.Repeat("1,", 19) + `1...`, `[` + strings.Repeat("1, ", 13) + "..."},
		{"cut on a character boundary", accents, `"` + strings.Repeat("é", 19) + `...`, accents[:40] + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compact.Show(json.RawMessage(tt.value)); got != tt.compact {
				t.Errorf("Compact.Show(%q) = %q, want %q", tt.value, got, tt.compact)
			}
			if got := Verbatim.Show(json.RawMessage(tt.value)); got != tt.verbatim {
				t.Errorf("Verbatim.Show(%q) = %q, want %q", tt.value, got, tt.verbatim)
			}
		})
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		value                 string
		want                  bool
		wantCompact, wantVerb string
	}{
		{`true`, true, "", ""},
		{`false`, false, "", ""},
		{`"true"`, false, `f: must be true or false, got "true"`, `f: must be a boolean, got "true"`},
		{`1`, false, `f: must be true or false, got 1`, `f: must be a boolean, got 1`},
		{`null`, false, `f: must be true or false, got null`, `f: must be a boolean, got null`},
		{`[true, false]`, false, `f: must be true or false, got [true,false]`, `f: must be a boolean, got [true, false]`},
	}
	for _, tt := range tests {
		got, err := member(t, Compact, tt.value).Bool()
		check(t, tt.value, got, err, tt.want, tt.wantCompact)
		got, err = member(t, Verbatim, tt.value).Bool()
		check(t, tt.value, got, err, tt.want, tt.wantVerb)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		value                    string
		want                     string
		wantAny, wantNonEmpty    string // Compact's whole message, "" for none
		wantVerbatimNonStringErr string // Verbatim's, for a value that is not a string
	}{
		{`"a"`, "a", "", "", ""},
		{`"\u00e9 \"q\""`, `é "q"`, "", "", ""},
		{`""`, "", "", "f: must not be empty", ""},
		{`1`, "", "f: must be a string, got 1", "f: must be a string, got 1", "f: must be a string, got 1"},
		{`null`, "", "f: must be a string, got null", "f: must be a string, got null", "f: must be a string, got null"},
		{`{"a": 1}`, "", `f: must be a string, got {"a":1}`, `f: must be a string, got {"a":1}`, `f: must be a string, got {"a": 1}`},
		{`["a"]`, "", `f: must be a string, got ["a"]`, `f: must be a string, got ["a"]`, `f: must be a string, got ["a"]`},
	}
	for _, tt := range tests {
		m := member(t, Compact, tt.value)
		got, err := m.AnyString()
		check(t, tt.value, got, err, tt.want, tt.wantAny)
		got, err = m.NonEmptyString()
		check(t, tt.value, got, err, tt.want, tt.wantNonEmpty)
		if tt.wantVerbatimNonStringErr != "" {
			got, err = member(t, Verbatim, tt.value).NonEmptyString()
			check(t, tt.value, got, err, "", tt.wantVerbatimNonStringErr)
		}
	}
}

func TestOneOf(t *testing.T) {
	allowed := []string{"fixed", "sliding"}
	tests := []struct{ value, want, wantErr string }{
		{`"fixed"`, "fixed", ""},
		{`"sliding"`, "sliding", ""},
		{`"Fixed"`, "", `f: must be one of "fixed", "sliding", got "Fixed"`},
		{`""`, "", `f: must be one of "fixed", "sliding", got ""`},
		{`1`, "", `f: must be one of "fixed", "sliding", got 1`},
		{`["fixed"]`, "", `f: must be one of "fixed", "sliding", got ["fixed"]`},
	}
	for _, tt := range tests {
		got, err := member(t, Compact, tt.value).OneOf(allowed...)
		check(t, tt.value, got, err, tt.want, tt.wantErr)
	}
}

func TestObject(t *testing.T) {
	tests := []struct{ value, wantCompact, wantVerb string }{
		{`{}`, "", ""},
		{`{"priority": 1, "filter": [["a", "==", "b"]]}`, "", ""},
		{`[]`, `f: must be an object, got []`, `f: must be an object, got []`},
		{`"x"`, `f: must be an object, got "x"`, `f: must be an object, got "x"`},
		{`null`, `f: must be an object, got null`, `f: must be an object, got null`},
		{`[ 1 ]`, `f: must be an object, got [1]`, `f: must be an object, got [ 1 ]`},
	}
	for _, tt := range tests {
		check(t, tt.value, 0, member(t, Compact, tt.value).Object(), 0, tt.wantCompact)
		check(t, tt.value, 0, member(t, Verbatim, tt.value).Object(), 0, tt.wantVerb)
	}
}

func TestPositiveInt(t *testing.T) {
	tests := []struct {
		value   string
		max     int64
		want    int64
		wantErr string
	}{
		{`1`, 10, 1, ""},
		{`10`, 10, 10, ""},
		{`6e1`, 100, 60, ""},
		{`60.0`, 100, 60, ""},
		{`9223372036854775807`, math.MaxInt64, math.MaxInt64, ""},
		{`11`, 10, 0, "f: must be an integer from 1 to 10, got 11"},
		{`1.1e1`, 10, 0, "f: must be an integer from 1 to 10, got 1.1e1"},
		{`1e400`, 10, 0, "f: must be an integer from 1 to 10, got 1e400"},
		{`1.5e400`, 10, 0, "f: must be an integer from 1 to 10, got 1.5e400"},
		{`10.5`, 10, 0, "f: must be an integer > 0, got 10.5"},
		{`0`, 10, 0, "f: must be an integer > 0, got 0"},
		{`-1`, 10, 0, "f: must be an integer > 0, got -1"},
		{`1.5`, 10, 0, "f: must be an integer > 0, got 1.5"},
		{`"5"`, 10, 0, `f: must be an integer > 0, got "5"`},
		{`true`, 10, 0, "f: must be an integer > 0, got true"},
		{`null`, 10, 0, "f: must be an integer > 0, got null"},
		{`9223372036854775808`, math.MaxInt64, 0, "f: must be an integer from 1 to 9223372036854775807, got 9223372036854775808"},
		{`-9223372036854775809`, math.MaxInt64, 0, "f: must be an integer > 0, got -9223372036854775809"},
	}
	for _, tt := range tests {
		got, err := member(t, Compact, tt.value).PositiveInt(tt.max)
		check(t, tt.value, got, err, tt.want, tt.wantErr)
	}
}

func TestIntIn(t *testing.T) {
	tests := []struct {
		value   string
		want    int64
		wantErr string
	}{
		{`200`, 200, ""},
		{`599`, 599, ""},
		{`4.29e2`, 429, ""},
		{`199`, 0, "f: must be an integer from 200 to 599, got 199"},
		{`600`, 0, "f: must be an integer from 200 to 599, got 600"},
		{`503.5`, 0, "f: must be an integer from 200 to 599, got 503.5"},
		{`"503"`, 0, `f: must be an integer from 200 to 599, got "503"`},
	}
	for _, tt := range tests {
		got, err := member(t, Compact, tt.value).IntIn(200, 599)
		check(t, tt.value, got, err, tt.want, tt.wantErr)
	}
}

func TestInteger(t *testing.T) {
	tests := []struct {
		value string
		want  int64
		ok    bool
	}{
		{`0`, 0, true},
		{`-7`, -7, true},
		{`9223372036854775807`, math.MaxInt64, true},
		{`-9223372036854775808`, math.MinInt64, true},
		{`1e3`, 1000, true},
		{`1E3`, 1000, true},
		{`-2.0`, -2, true},
		{`9223372036854775808`, 0, false}, // one past the largest int64
		{`1e19`, 0, false},
		{`0.5`, 0, false},
		{`1e-1`, 0, false},
		{``, 0, false},
		{`"1"`, 0, false},
		{`+1`, 0, false},
		{`NaN`, 0, false},
		{`-Inf`, 0, false},
		{`true`, 0, false},
	}
	for _, tt := range tests {
		got, ok := Integer(json.RawMessage(tt.value))
		if got != tt.want || ok != tt.ok {
			t.Errorf("Integer(%s) = %d, %v; want %d, %v", tt.value, got, ok, tt.want, tt.ok)
		}
	}
}
