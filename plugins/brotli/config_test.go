package brotli

import (
	"reflect"
	"strings"
	"testing"

	"gw/plugins/encoding"
)

func TestParseAccepts(t *testing.T) {
	defaults := Config{Common: encoding.Common{Types: []string{"text/html"}, MinLength: 20, HTTPVersion: 11}, CompLevel: 6, LGWin: 19}
	with := func(f func(*Config)) Config { c := defaults; f(&c); return c }
	cases := map[string]Config{
		// t/plugin/brotli.t TEST 1 "sanity".
		`{}`: defaults,
		`{"comp_level":11,"lgwin":24,"lgblock":0,"mode":0}`: with(func(c *Config) { c.CompLevel, c.LGWin = 11, 24 }),
		`{"comp_level":0,"lgwin":0}`:                        with(func(c *Config) { c.CompLevel, c.LGWin = 0, 0 }),
		`{"min_length":1,"http_version":1.0,"vary":true}`:   with(func(c *Config) { c.MinLength, c.HTTPVersion, c.Vary = 1, 10, true }),
		`{"types":"*"}`:                       with(func(c *Config) { c.Types = nil }),
		`{"types":["text/plain"],"_meta":{}}`: with(func(c *Config) { c.Types = []string{"text/plain"} }),
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

// t/plugin/brotli.t's schema checks, each refusal naming its field.
func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		`[]`:                 "must be a JSON object",
		`{"types":[]}`:       `types: must be "*" or a non-empty array`,
		`{"types":[""]}`:     "types[0]: must not be empty",
		`{"min_length":0}`:   "min_length: must be an integer > 0, got 0",
		`{"mode":3}`:         "mode: must be an integer from 0 to 2, got 3",
		`{"comp_level":12}`:  "comp_level: must be an integer from 0 to 11, got 12",
		`{"comp_level":-1}`:  "comp_level: must be an integer from 0 to 11, got -1",
		`{"lgwin":9}`:        "lgwin: must be 0 or from 10 to 24, got 9",
		`{"lgwin":25}`:       "lgwin: must be an integer from 0 to 24, got 25",
		`{"lgblock":15}`:     "lgblock: must be 0 or from 16 to 24, got 15",
		`{"lgblock":16}`:     "lgblock: 16 is not supported yet",
		`{"lgblock":24}`:     "lgblock: 24 is not supported yet",
		`{"mode":1}`:         "mode: 1 is not supported yet",
		`{"mode":2}`:         "mode: 2 is not supported yet",
		`{"http_version":2}`: "http_version: must be 1.1 or 1.0, got 2",
		`{"vary":"yes"}`:     `vary: must be a boolean, got "yes"`,
		`{"buffers":{}}`:     "buffers: unknown field",
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
