package encoding

import (
	"math"
	"testing"
)

func TestTypes(t *testing.T) {
	html := NewTypes([]string{"text/html", "Application/JSON"})
	every := NewTypes(nil)
	cases := []struct {
		types *Types
		ct    string
		want  bool
	}{
		{&html, "text/html", true},
		{&html, "text/html; charset=utf-8", true},
		{&html, "TEXT/HTML ;charset=utf-8", true},
		{&html, "application/json", true},
		{&html, "text/plain", false},
		{&html, "text/htmlx", false},
		{&html, "", false},
		{&every, "image/png", true},
		{&every, "", false},
	}
	for _, tc := range cases {
		if got := tc.types.Match([]byte(tc.ct)); got != tc.want {
			t.Errorf("%v %q: %v, want %v", tc.types.list, tc.ct, got, tc.want)
		}
	}
}

func TestAccepts(t *testing.T) {
	cases := []struct {
		header, coding string
		want           bool
	}{
		{"gzip", "gzip", true},
		{"gzip, deflate, br", "br", true},
		{"GZIP;q=0.5", "gzip", true},
		{"br;q=1, gzip;q=0", "gzip", false},
		{"gzip; q=0.000", "gzip", false},
		{"gzip;q=0.001", "gzip", true},
		{"*", "br", true},
		{"*;q=0", "br", false},
		{"identity", "gzip", false},
		{"", "gzip", false},
		{"x-gzip", "gzip", false},
		{"brotli", "br", false},
	}
	for _, tc := range cases {
		if got := Accepts([]byte(tc.header), []byte(tc.coding)); got != tc.want {
			t.Errorf("Accept-Encoding %q, %s: %v, want %v", tc.header, tc.coding, got, tc.want)
		}
	}
}

func TestAppendWeakETag(t *testing.T) {
	for etag, want := range map[string]string{`"v1"`: `W/"v1"`, `W/"v1"`: "", "": ""} {
		got, ok := AppendWeakETag(nil, []byte(etag))
		if string(got) != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", etag, got, ok, want)
		}
	}
}

func TestContentLength(t *testing.T) {
	for value, want := range map[string]int{"0": 0, "20": 20, "570000": 570000, "99999999999999999999999": math.MaxInt} {
		if n, ok := contentLength([]byte(value)); !ok || n != want {
			t.Errorf("%q: %d %v, want %d", value, n, ok, want)
		}
	}
	for _, value := range []string{"", "-1", "1a", " 1"} {
		if _, ok := contentLength([]byte(value)); ok {
			t.Errorf("%q: read as a length", value)
		}
	}
}
