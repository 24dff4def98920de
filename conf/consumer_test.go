package conf

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeConsumerAccepts(t *testing.T) {
	long := strings.Repeat("a", 256)
	cases := map[string]struct {
		body string
		want Consumer
	}{
		"username only": {`{"username":"jack"}`, Consumer{Username: "jack"}},
		"all fields": {
			`{"username":"jack_1-x","desc":"d","labels":{"team":"a"},"plugins":{"key-auth":{"key":"k"}},"create_time":1,"update_time":2}`,
			Consumer{Username: "jack_1-x", Desc: "d", Labels: map[string]string{"team": "a"},
				Plugins:    map[string]json.RawMessage{"key-auth": json.RawMessage(`{"key":"k"}`)},
				CreateTime: 1, UpdateTime: 2},
		},
		"empty plugins":        {`{"username":"a","plugins":{}}`, Consumer{Username: "a", Plugins: map[string]json.RawMessage{}}},
		"id is ignored":        {`{"username":"a","id":"other"}`, Consumer{Username: "a"}},
		"longest username":     {`{"username":"` + long + `"}`, Consumer{Username: long}},
		"digits and dashes":    {`{"username":"0-_"}`, Consumer{Username: "0-_"}},
		"plugins kept compact": {`{"username":"a","plugins":{"p":{ "x" : 1 }}}`, Consumer{Username: "a", Plugins: map[string]json.RawMessage{"p": json.RawMessage(`{"x":1}`)}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeConsumer([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestDecodeConsumerRejects(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"not JSON":            {`{"username":`, "malformed JSON"},
		"not an object":       {`[]`, "wrong type: expected object"},
		"no username":         {`{"desc":"x"}`, `property "username" validation failed: is required`},
		"empty username":      {`{"username":""}`, `property "username" validation failed: must be 1-256 characters`},
		"username too long":   {`{"username":"` + strings.Repeat("a", 257) + `"}`, `"username" validation failed`},
		"dot in username":     {`{"username":"a.b"}`, `"username" validation failed`},
		"space in username":   {`{"username":"a b"}`, `"username" validation failed`},
		"numeric username":    {`{"username":1}`, "expected string, got number 1"},
		"unknown field":       {`{"username":"a","uri":"/"}`, `property "uri" validation failed: unknown field`},
		"group_id":            {`{"username":"a","group_id":"1"}`, "group_id is not supported yet"},
		"plugins not object":  {`{"username":"a","plugins":[]}`, `"plugins" validation failed: wrong type`},
		"desc too long":       {`{"username":"a","desc":"` + strings.Repeat("d", 257) + `"}`, `"desc" validation failed`},
		"label with space":    {`{"username":"a","labels":{"k":"a b"}}`, `"labels.k" validation failed`},
		"bad id":              {`{"username":"a","id":"a/b"}`, `"id" validation failed`},
		"create_time string":  {`{"username":"a","create_time":"1"}`, `"create_time" validation failed`},
		"username not string": {`{"username":null}`, `"username" validation failed`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeConsumer([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckUsername(t *testing.T) {
	for _, ok := range []string{"a", "A-z_09", strings.Repeat("x", 256)} {
		if err := CheckUsername(ok); err != nil {
			t.Errorf("CheckUsername(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "..", "é", strings.Repeat("x", 257)} {
		if CheckUsername(bad) == nil {
			t.Errorf("CheckUsername(%q) accepted", bad)
		}
	}
}

// A consumer survives the trip to a worker: encoded in a Snapshot and decoded back.
func TestConsumerRoundTrip(t *testing.T) {
	in, err := DecodeConsumer([]byte(`{"username":"jack","plugins":{"key-auth":{"key":"k"}},"labels":{"a":"b"}}`))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(Snapshot{Consumers: []Consumer{*in}})
	if err != nil {
		t.Fatal(err)
	}
	var out Snapshot
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Consumers) != 1 || !reflect.DeepEqual(out.Consumers[0], *in) {
		t.Fatalf("round trip: got %+v, want %+v", out.Consumers, *in)
	}
}

func FuzzDecodeConsumer(f *testing.F) {
	for _, body := range []string{
		`{"username":"jack","plugins":{"key-auth":{"key":"k"}}}`,
		`{"username":"a","plugins":{},"labels":{"x":"y"},"desc":""}`,
		`{"username":"a.b"}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeConsumer(data)
		if err != nil {
			if _, ok := errors.AsType[*ObjectError](err); !ok {
				t.Fatalf("error %v is %T, not *ObjectError", err, err)
			}
			return
		}
		encoded, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeConsumer(encoded)
		if err != nil {
			t.Fatalf("%s re-encoded as %s no longer decodes: %v", data, encoded, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("%s re-encoded as %s decodes differently", data, encoded)
		}
	})
}
