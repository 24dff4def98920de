package uriblocker

import (
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for _, raw := range []string{
		// t/plugin/uri-blocker.t TEST 2 "multiple valid rules".
		`{"block_rules":["^a","^b"]}`,
		// TEST 7 "multiple block rules", TEST 12 "SQL injection".
		`{"block_rules":["aa","bb","c\\d+"]}`,
		`{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`,
		// TEST 17, 19: rejected_msg, case_insensitive.
		`{"block_rules":["aa"],"rejected_msg":"access is not allowed"}`,
		`{"block_rules":["AA"],"rejected_msg":"access is not allowed","case_insensitive":true}`,
		`{"block_rules":["^/internal/"],"rejected_code":410}`,
		`{"block_rules":[]}`,
		`{"block_rules":["x"],"rejected_code":200,"_meta":{}}`,
	} {
		if _, err := Parse([]byte(raw)); err != nil {
			t.Errorf("Parse(%s): %v", raw, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		// t/plugin/uri-blocker.t TEST 1 "invalid regular expression".
		"invalid regex": {`{"block_rules":[".+("]}`, `block_rules: item 1: invalid regular expression ".+(": error parsing regexp: missing closing )`},
		// TEST 3 "multiple rules(include one invalid rule)".
		"one invalid":   {`{"block_rules":["^a","^b("]}`, `block_rules: item 2: invalid regular expression "^b("`},
		"look-ahead":    {`{"block_rules":["a(?=b)"]}`, "RE2 syntax"},
		"missing rules": {`{"rejected_code":403}`, "block_rules: is required"},
		"not array":     {`{"block_rules":"aa"}`, "block_rules: must be an array of strings"},
		"empty rule":    {`{"block_rules":[""]}`, "block_rules: item 1: must be 1 to 4096 characters, got 0"},
		"long rule":     {`{"block_rules":["` + strings.Repeat("a", 4097) + `"]}`, "must be 1 to 4096 characters, got 4097"},
		"duplicate":     {`{"block_rules":["a","b","a"]}`, `block_rules: items 1 and 3 are both "a"`},
		"rule number":   {`{"block_rules":[1]}`, "block_rules: item 1 must be a string, got 1"},
		// TEST 16 "invalid rejected_msg length or type".
		"msg empty":     {`{"block_rules":["^a"],"rejected_msg":""}`, "rejected_msg: must not be empty"},
		"msg boolean":   {`{"block_rules":["^a"],"rejected_msg":true}`, "rejected_msg: must be a string, got true"},
		"code low":      {`{"block_rules":["^a"],"rejected_code":199}`, "rejected_code: must be an integer from 200 to 599, got 199"},
		"code high":     {`{"block_rules":["^a"],"rejected_code":600}`, "rejected_code: must be an integer from 200 to 599, got 600"},
		"case not bool": {`{"block_rules":["^a"],"case_insensitive":"yes"}`, "case_insensitive: must be a boolean"},
		"unknown field": {`{"block_rules":["^a"],"allow_rules":["b"]}`, "allow_rules: unknown field"},
		"not an object": {`"x"`, "configuration must be a JSON object"},
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
