package requestid

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		// t/plugin/request-id.t TEST 1 "sanity", TEST 6, 8, 15, 17.
		`{}`,
		`{"header_name":"Custom-Header-Name"}`,
		`{"include_in_response":false}`,
		`{"algorithm":"nanoid"}`,
		`{"algorithm":"uuidv7"}`,
		`{"algorithm":"uuid","include_in_response":true}`,
		`{"algorithm":"range_id","range_id":{"length":6,"char_set":"abcdef"}}`,
		`{"algorithm":"range_id","range_id":{}}`,
		`{"algorithm":"range_id","range_id":{"length":1024},"_meta":{}}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
	c, _ := Parse([]byte(`{}`))
	if string(c.HeaderName) != "X-Request-Id" || !c.IncludeInResponse || c.Algorithm != UUID || c.Length != 16 || string(c.CharSet) != DefaultCharSet {
		t.Errorf("defaults: %+v", c)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		// t/plugin/request-id.t TEST 2 "wrong type".
		"header number": {`{"header_name":123}`, "header_name: must be a string, got 123"},
		// TEST 12 "wrong algorithm type", TEST 18 "algorithm invalid value rejected".
		"algorithm":        {`{"algorithm":"bad_algorithm"}`, `algorithm: must be one of "uuid", "nanoid", "range_id", "ksuid", "uuidv7"`},
		"ksuid":            {`{"algorithm":"ksuid"}`, `algorithm: "ksuid" is not supported yet`},
		"header empty":     {`{"header_name":""}`, "header_name: must not be empty"},
		"header space":     {`{"header_name":"X Request"}`, "header_name: must be a header field name"},
		"header colon":     {`{"header_name":"X:Id"}`, "header_name: must be a header field name"},
		"include string":   {`{"include_in_response":"yes"}`, "include_in_response: must be a boolean"},
		"length short":     {`{"range_id":{"length":5}}`, "range_id.length: must be an integer from 6 to 1024, got 5"},
		"length long":      {`{"range_id":{"length":1025}}`, "range_id.length: must be an integer from 6 to 1024, got 1025"},
		"char_set short":   {`{"range_id":{"char_set":"abc"}}`, "range_id.char_set: must be at least 6 characters, got 3"},
		"char_set space":   {`{"range_id":{"char_set":"abc def"}}`, "range_id.char_set: must be printable ASCII"},
		"range_id extra":   {`{"range_id":{"size":8}}`, "range_id.size: unknown field"},
		"range_id not obj": {`{"range_id":8}`, "range_id: configuration must be a JSON object"},
		"unknown":          {`{"header":"X"}`, "header: unknown field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
