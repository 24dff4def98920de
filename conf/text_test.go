package conf

import (
	"bytes"
	"encoding/json"
	"iter"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckText(t *testing.T) {
	const (
		badUTF8   = `the string is not valid UTF-8 (byte 0xff); send text as UTF-8`
		nul       = `the string holds NUL (\u0000), which no field accepts`
		surrogate = `the string holds a lone UTF-16 surrogate (\ud800), which is not a character; escape characters outside the BMP as a surrogate pair`
	)
	cases := []struct {
		name, body string
		want       string // "" to accept
	}{
		{"plain", `{"uri":"/a","name":"n"}`, ""},
		{"empty object and array", `{"a":{},"b":[],"c":[{}]}`, ""},
		{"scalars", `{"a":1,"b":-1.5e3,"c":true,"d":false,"e":null}`, ""},
		{"space everywhere", " {\n \"a\" :\t[ 1 , \"x\" ] , \"b\" : { } }\r\n", ""},
		{"multi-byte UTF-8", `{"desc":"é✓😀"}`, ""},
		{"U+FFFD written as is", "{\"desc\":\"\uFFFD\"}", ""},
		{"escapes", `{"desc":"\"\\\/\b\f\n\r\t\u00e9"}`, ""},
		{"surrogate pair", `{"desc":"\ud83d\ude00"}`, ""},
		{"quote in a member name", `{"a\"b":{"c":"\u0001"}}`, ""},
		{"top-level string", `"x"`, ""},

		{"invalid UTF-8 in uri", "{\"uri\":\"/a\xff\"}", `invalid configuration: property "uri" validation failed: ` + badUTF8},
		{"invalid UTF-8 in a label value", "{\"labels\":{\"env\":\"\xff\"}}", `invalid configuration: property "labels.env" validation failed: ` + badUTF8},
		{"invalid UTF-8 in a label key", "{\"labels\":{\"\xff\":\"v\"}}", `invalid configuration: property "labels" validation failed: a member name is not valid UTF-8 (byte 0xff); send text as UTF-8`},
		{"invalid UTF-8 in a top-level key", "{\"\xff\":1}", `invalid configuration: the body: a member name is not valid UTF-8 (byte 0xff); send text as UTF-8`},
		{"truncated sequence", "{\"name\":\"\xc3\"}", `invalid configuration: property "name" validation failed: the string is not valid UTF-8 (byte 0xc3); send text as UTF-8`},
		{"overlong encoding", "{\"name\":\"\xc0\xaf\"}", `invalid configuration: property "name" validation failed: the string is not valid UTF-8 (byte 0xc0); send text as UTF-8`},
		{"encoded surrogate", "{\"name\":\"\xed\xa0\x80\"}", `invalid configuration: property "name" validation failed: the string is not valid UTF-8 (byte 0xed); send text as UTF-8`},
		{"deep in plugins", "{\"plugins\":{\"proxy-rewrite\":{\"headers\":{\"set\":{\"X\":\"\xfe\"}}}}}", `invalid configuration: property "plugins.proxy-rewrite.headers.set.X" validation failed: the string is not valid UTF-8 (byte 0xfe); send text as UTF-8`},
		{"array item counted from 0", "{\"uris\":[\"/a\",\"/b\",\"/\xff\"]}", `invalid configuration: property "uris[2]" validation failed: ` + badUTF8},
		{"after nested values", "{\"a\":[1,{\"b\":[]}],\"c\":\"\xff\"}", `invalid configuration: property "c" validation failed: ` + badUTF8},
		{"NUL in uri", `{"uri":"/a\u0000"}`, `invalid configuration: property "uri" validation failed: ` + nul},
		{"NUL in a member name", `{"labels":{"a\u0000":"v"}}`, `invalid configuration: property "labels" validation failed: a member name holds NUL (\u0000), which no field accepts`},
		{"lone high surrogate", `{"desc":"\ud800"}`, `invalid configuration: property "desc" validation failed: ` + surrogate},
		{"high surrogate then a letter", `{"desc":"\ud800x"}`, `invalid configuration: property "desc" validation failed: ` + surrogate},
		{"two high surrogates", `{"desc":"\ud800\ud800"}`, `invalid configuration: property "desc" validation failed: ` + surrogate},
		{"lone low surrogate", `{"desc":"\uDC00"}`, `invalid configuration: property "desc" validation failed: the string holds a lone UTF-16 surrogate (\udc00), which is not a character; escape characters outside the BMP as a surrogate pair`},
		{"top-level string", "\"\xff\"", `invalid configuration: the body: ` + badUTF8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.body)) {
				if tc.want != "" {
					t.Fatalf("test body %q is not JSON", tc.body)
				}
				return
			}
			err := CheckText([]byte(tc.body))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckText(%q) = %v, want nil", tc.body, err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("CheckText(%q) =\n %v\nwant\n %s", tc.body, err, tc.want)
			}
		})
	}
}

// FuzzCheckText holds CheckText to its promise: in JSON it accepts, decoding changes no
// text (a U+FFFD comes only from the input's own) and leaves no NUL.
func FuzzCheckText(f *testing.F) {
	for _, seed := range []string{`{"a":"b"}`, `["\ud83d\ude00",1,{"c":null}]`, "{\"a\":\"\xff\"}", `"\u0000"`, `{"a\"":"\ud800"}`, "\"\uFFFD\""} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil || CheckText(data) != nil {
			return
		}
		ownReplacement := bytes.Contains(data, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`))
		for s := range decodedStrings(v) {
			if strings.ContainsRune(s, 0) || strings.ContainsRune(s, utf8.RuneError) && !ownReplacement {
				t.Fatalf("accepted %q, whose string %q decoding changed", data, s)
			}
		}
	})
}

// decodedStrings yields every member name and string value in v.
func decodedStrings(v any) iter.Seq[string] {
	return func(yield func(string) bool) {
		var walk func(any) bool
		walk = func(v any) bool {
			switch v := v.(type) {
			case string:
				return yield(v)
			case []any:
				for _, item := range v {
					if !walk(item) {
						return false
					}
				}
			case map[string]any:
				for name, item := range v {
					if !yield(name) || !walk(item) {
						return false
					}
				}
			}
			return true
		}
		walk(v)
	}
}
