package gzip

import (
	"reflect"
	"strings"
	"testing"

	"gw/plugins/encoding"
)

func TestParseAccepts(t *testing.T) {
	defaults := Config{Common: encoding.Common{Types: []string{"text/html"}, MinLength: 20, HTTPVersion: 11}, CompLevel: 1, BuffersNumber: 32, BuffersSize: 4096}
	with := func(f func(*Config)) Config { c := defaults; f(&c); return c }
	cases := map[string]Config{
		// t/plugin/gzip.t TEST 1 "sanity".
		`{}`: defaults,
		// TEST 4 "compress level", with its buffers; APISIX's doc example gives number alone.
		`{"comp_level":9}`: with(func(c *Config) { c.CompLevel = 9 }),
		`{"comp_level":9,"buffers":{"number":8,"size":16384}}`: with(func(c *Config) { c.CompLevel, c.BuffersNumber, c.BuffersSize = 9, 8, 16384 }),
		`{"buffers":{"number":8}}`:                             with(func(c *Config) { c.BuffersNumber = 8 }),
		`{"buffers":{"size":1}}`:                               with(func(c *Config) { c.BuffersSize = 1 }),
		// TEST 6 "min length", TEST 8 "http version".
		`{"min_length":21}`:    with(func(c *Config) { c.MinLength = 21 }),
		`{"http_version":1.0}`: with(func(c *Config) { c.HTTPVersion = 10 }),
		`{"http_version":1.1}`: defaults,
		// TEST 11 "types", TEST 15 "match all types", TEST 17 "vary".
		`{"types":["text/plain","application/json"]}`: with(func(c *Config) { c.Types = []string{"text/plain", "application/json"} }),
		`{"types":"*"}`:                         with(func(c *Config) { c.Types = nil }),
		`{"vary":true}`:                         with(func(c *Config) { c.Vary = true }),
		`{"buffers":{}}`:                        defaults,
		`{"buffers":{"number":32,"size":4096}}`: defaults,
		`{"buffers":{"number":32}}`:             defaults,
		`{"_meta":{}}`:                          defaults,
	}
	for raw, want := range cases {
		t.Run(raw, func(t *testing.T) {
			got, err := Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("got %+v, want %+v", *got, want)
			}
		})
	}
}

// t/plugin/gzip.t TEST 19 "schema check", each refusal naming its field.
func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		`[]`:                              "must be a JSON object",
		`{"types":[]}`:                    `types: must be "*" or a non-empty array of media types, got []`,
		`{"types":"text/html"}`:           `types: must be "*" or a non-empty array`,
		`{"types":[""]}`:                  "types[0]: must not be empty",
		`{"min_length":0}`:                "min_length: must be an integer > 0, got 0",
		`{"comp_level":10}`:               "comp_level: must be an integer from 1 to 9, got 10",
		`{"comp_level":0}`:                "comp_level: must be an integer from 1 to 9, got 0",
		`{"http_version":2}`:              "http_version: must be 1.1 or 1.0, got 2",
		`{"http_version":"1.1"}`:          `http_version: must be 1.1 or 1.0, got "1.1"`,
		`{"buffers":{"number":0}}`:        "buffers.number: must be an integer > 0, got 0",
		`{"buffers":{"size":0}}`:          "buffers.size: must be an integer > 0, got 0",
		`{"buffers":{"count":1}}`:         "buffers.count: unknown field",
		`{"buffers":1}`:                   "buffers: configuration must be a JSON object",
		`{"buffers":{"size":2147483649}}`: "buffers.size: must be an integer from 1 to 2147483648, got 2147483649",
		`{"buffers":{"number":1.5}}`:      "buffers.number: must be an integer > 0, got 1.5",
		`{"vary":0}`:                      "vary: must be a boolean, got 0",
		`{"brotli":true}`:                 "brotli: unknown field",
	}
	for raw, want := range cases {
		t.Run(raw, func(t *testing.T) {
			_, err := Parse([]byte(raw))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want an error containing %q", err, want)
			}
		})
	}
}

// buffers' product bounds what a streamed body's compressor holds, capped where an int
// on any platform holds it.
func TestFlushAfter(t *testing.T) {
	for raw, want := range map[string]int{
		`{}`:                                    32 * 4096,
		`{"buffers":{"number":8,"size":16384}}`: 8 * 16384,
		`{"buffers":{"number":1,"size":1}}`:     1,
		`{"buffers":{"number":2147483648,"size":2147483648}}`: 1<<31 - 1,
	} {
		c, err := Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.FlushAfter(); got != want {
			t.Errorf("%s: FlushAfter %d, want %d", raw, got, want)
		}
	}
}
