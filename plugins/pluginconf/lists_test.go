package pluginconf

import (
	"reflect"
	"strings"
	"testing"
)

func TestStringList(t *testing.T) {
	for _, tc := range []struct {
		value   string
		min     int
		want    []string
		wantErr string
	}{
		{value: `["a","b"]`, min: 1, want: []string{"a", "b"}},
		{value: `[]`, min: 0, want: []string{}},
		{value: `[]`, min: 1, wantErr: "l: must have at least 1 item(s), got 0"},
		{value: `"a"`, min: 1, wantErr: `l: must be an array of strings, got "a"`},
		{value: `["a",1]`, min: 1, wantErr: "l: item 2 must be a string, got 1"},
		{value: `[null]`, min: 1, wantErr: "l: item 1 must be a string, got null"},
	} {
		got, err := Member{Name: "l", Value: []byte(tc.value), style: Verbatim}.StringList(tc.min)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.value, got, err, tc.want)
		}
	}
}
