package filelogger

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"path":"logs/file.log"}`, ""},
		{`{"path":"/tmp/a.log","log_format":{"h":"$host"},"include_req_body":true,"_meta":{}}`, ""},
		{`{}`, "path: required"},
		{`{"path":""}`, "path: must not be empty"},
		{`{"path":"a","include_resp_body":true}`, "include_resp_body: is not supported yet"},
		{`{"path":"a","batch_max_size":1}`, "batch_max_size: unknown field; known fields: path, log_format, include_req_body"},
	} {
		_, err := Parse(json.RawMessage(tc.raw))
		if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || (err != nil && got != tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.raw, err, tc.want)
		}
	}
}
