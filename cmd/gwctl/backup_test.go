package main

import (
	"reflect"
	"testing"
)

func TestSplitTrailingPrefix(t *testing.T) {
	cases := []struct {
		args       []string
		rest       []string
		wantPrefix string
	}{
		{[]string{"b.json"}, []string{"b.json"}, ""},
		{[]string{"b.json", "--prefix", "/srv/gw"}, []string{"b.json"}, "/srv/gw"},
		{[]string{"b.json", "-p", "/srv/gw"}, []string{"b.json"}, "/srv/gw"},
		{[]string{"b.json", "--prefix=/srv/gw"}, []string{"b.json"}, "/srv/gw"},
		{[]string{"b.json", "--prefix"}, []string{"b.json", "--prefix"}, ""}, // no value: left as an argument
		{[]string{"a.json", "b.json"}, []string{"a.json", "b.json"}, ""},
		{nil, nil, ""},
	}
	for _, tc := range cases {
		rest, prefix := splitTrailingPrefix(tc.args)
		if !reflect.DeepEqual(rest, tc.rest) || prefix != tc.wantPrefix {
			t.Errorf("splitTrailingPrefix(%q) = %q, %q; want %q, %q", tc.args, rest, prefix, tc.rest, tc.wantPrefix)
		}
	}
}
