package keyauth

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	defaults := Config{Header: "apikey", Query: "apikey", Realm: "key"}
	cases := map[string]struct {
		raw  string
		want Config
	}{
		"empty":     {`{}`, defaults},
		"header":    {`{"header":"X-Key"}`, Config{Header: "X-Key", Query: "apikey", Realm: "key"}},
		"query":     {`{"query":"k"}`, Config{Header: "apikey", Query: "k", Realm: "key"}},
		"hide":      {`{"hide_credentials":true}`, Config{Header: "apikey", Query: "apikey", Realm: "key", HideCredentials: true}},
		"realm":     {`{"realm":"my realm!"}`, Config{Header: "apikey", Query: "apikey", Realm: "my realm!"}},
		"anonymous": {`{"anonymous_consumer":"guest"}`, Config{Header: "apikey", Query: "apikey", Realm: "key", AnonymousConsumer: "guest"}},
		"_meta":     {`{"_meta":{"priority":1}}`, defaults},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		"not an object":    {`[]`, "must be a JSON object"},
		"unknown field":    {`{"key":"k"}`, "key: unknown field"},
		"header number":    {`{"header":1}`, "header: must be a string, got 1"},
		"header empty":     {`{"header":""}`, "header: must not be empty"},
		"query null":       {`{"query":null}`, "query: must be a string"},
		"hide string":      {`{"hide_credentials":"yes"}`, "hide_credentials: must be a boolean"},
		"realm with quote": {`{"realm":"a\"b"}`, "realm: must be 1-128 printable ASCII"},
		"realm too long":   {`{"realm":"` + strings.Repeat("r", 129) + `"}`, "realm: must be 1-128"},
		"realm control":    {`{"realm":"a\tb"}`, "realm: must be 1-128"},
		"anonymous empty":  {`{"anonymous_consumer":""}`, "anonymous_consumer: must not be empty"},
		"_meta not object": {`{"_meta":1}`, "_meta: must be an object"},
		"twice":            {`{"header":"a","header":"b"}`, "header: appears twice"},
		"trailing data":    {`{} {}`, "data after the object"},
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

func TestParseConsumer(t *testing.T) {
	got, err := ParseConsumer([]byte(`{"key":"auth-one"}`))
	if err != nil || got.Key != "auth-one" {
		t.Fatalf("ParseConsumer = %+v, %v", got, err)
	}
	for _, ref := range []string{"$env://GW_KEY", "$ENV://GW_KEY", "$env://GW_CREDS/key"} {
		if got, err := ParseConsumer([]byte(`{"key":"` + ref + `"}`)); err != nil || got.Key != ref {
			t.Errorf("ParseConsumer(%s) = %+v, %v; want the reference kept for the master", ref, got, err)
		}
	}
	rejects := map[string]struct{ raw, want string }{
		"secret manager":     {`{"key":"$secret://vault/1/key"}`, "key: secret managers ($secret://) are not supported yet"},
		"env without a name": {`{"key":"$env://"}`, "key: \"$env://\": the name after $env:// must be an environment variable name"},
		"missing key":        {`{}`, "key: is required"},
		"empty key":          {`{"key":""}`, "key: must not be empty"},
		"numeric key":        {`{"key":1}`, "key: must be a string"},
		"route field":        {`{"key":"k","header":"x"}`, "header: unknown field"},
		"not an object":      {`"k"`, "must be a JSON object"},
	}
	for name, tc := range rejects {
		t.Run(name, func(t *testing.T) {
			err := plugin{}.ValidateConsumer([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
