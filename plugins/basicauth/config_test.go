package basicauth

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	accepts := map[string]struct {
		raw  string
		want Config
	}{
		"empty":     {`{}`, Config{Realm: "basic"}},
		"hide":      {`{"hide_credentials":true}`, Config{Realm: "basic", HideCredentials: true}},
		"realm":     {`{"realm":"shop"}`, Config{Realm: "shop"}},
		"anonymous": {`{"anonymous_consumer":"guest"}`, Config{Realm: "basic", AnonymousConsumer: "guest"}},
		"_meta":     {`{"_meta":{}}`, Config{Realm: "basic"}},
	}
	for name, tc := range accepts {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.raw))
			if err != nil || !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("Parse = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	rejects := map[string]struct{ raw, want string }{
		"not an object":   {`null`, "must be a JSON object"},
		"consumer field":  {`{"username":"a"}`, "username: unknown field"},
		"hide not bool":   {`{"hide_credentials":1}`, "hide_credentials: must be a boolean"},
		"realm backslash": {`{"realm":"a\\b"}`, "realm: must be 1-128"},
		"realm empty":     {`{"realm":""}`, "realm: must not be empty"},
		"anonymous num":   {`{"anonymous_consumer":1}`, "anonymous_consumer: must be a string"},
	}
	for name, tc := range rejects {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseConsumer(t *testing.T) {
	got, err := ParseConsumer([]byte(`{"username":"foo","password":"b:a:r"}`))
	if err != nil || *got != (ConsumerConfig{Username: "foo", Password: "b:a:r"}) {
		t.Fatalf("ParseConsumer = %+v, %v", got, err)
	}
	for _, ref := range []string{"$env://GW_PASSWORD", "$Env://GW_CREDS/password"} {
		if got, err := ParseConsumer([]byte(`{"username":"u","password":"` + ref + `"}`)); err != nil || got.Password != ref {
			t.Errorf("ParseConsumer(password %s) = %+v, %v; want the reference kept for the master", ref, got, err)
		}
	}
	rejects := map[string]struct{ raw, want string }{
		"secret manager":        {`{"username":"u","password":"$secret://vault/1/pw"}`, "password: secret managers ($secret://) are not supported yet"},
		"env without a name":    {`{"username":"u","password":"$env://1"}`, "password: \"$env://1\": the name after $env:// must be an environment variable name"},
		"reference in username": {`{"username":"$env://GW_USER","password":"p"}`, "username: a secret reference is accepted only in password"},
		"no username":           {`{"password":"p"}`, "username: is required"},
		"no password":           {`{"username":"u"}`, "password: is required"},
		"empty password":        {`{"username":"u","password":""}`, "password: must not be empty"},
		"space in password":     {`{"username":"u","password":"a b"}`, "password: must not contain white space"},
		"colon in username":     {`{"username":"u:v","password":"p"}`, "username: must not contain ':'"},
		"numeric password":      {`{"username":"u","password":1}`, "password: must be a string"},
		"route field":           {`{"username":"u","password":"p","hide_credentials":true}`, "hide_credentials: unknown field"},
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
