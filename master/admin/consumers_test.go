package admin

import (
	"strings"
	"testing"
	"time"

	_ "gw/plugins/all"
)

const jack = `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`

const jackValue = `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}},` +
	`"create_time":1700000000,"update_time":1700000000}`

func TestConsumerPut(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/consumers", jack), 201,
		`{"key":"/apisix/consumers/jack","value":`+jackValue+`}`)

	f.clock = f.clock.Add(time.Minute)
	expect(t, f.call("PUT", "/apisix/admin/consumers/jack", `{"username":"jack","desc":"d"}`), 200,
		`{"key":"/apisix/consumers/jack","value":{"username":"jack","desc":"d","create_time":1700000000,"update_time":1700000060}}`)
	expect(t, f.call("GET", "/apisix/admin/consumers/jack", ""), 200,
		`{"key":"/apisix/consumers/jack","value":{"username":"jack","desc":"d","create_time":1700000000,"update_time":1700000060},"createdIndex":1,"modifiedIndex":2}`)
	expect(t, f.call("GET", "/apisix/admin/consumers", ""), 200, "")
	if snap := f.pub.last(); snap == nil || len(snap.Consumers) != 1 || snap.Consumers[0].Desc != "d" {
		t.Fatalf("published snapshot = %+v", snap)
	}

	expect(t, f.call("DELETE", "/apisix/admin/consumers/jack", ""), 200, `{"deleted":"1","key":"/apisix/consumers/jack"}`)
	expect(t, f.call("GET", "/apisix/admin/consumers/jack", ""), 404, `{"message":"Key not found"}`)
	expect(t, f.call("DELETE", "/apisix/admin/consumers/jack", ""), 404, `{"message":"Key not found"}`)
	if snap := f.pub.last(); len(snap.Consumers) != 0 {
		t.Errorf("after delete, published consumers = %+v", snap.Consumers)
	}
}

func TestConsumerPutRejects(t *testing.T) {
	cases := []rejectedPut{
		{"path and body disagree", "/apisix/admin/consumers/jill", jack, "wrong username"},
		{"no username anywhere", "/apisix/admin/consumers", `{"desc":"x"}`, `property "username" validation failed: is required`},
		{"no username in body", "/apisix/admin/consumers/jack", `{"desc":"x"}`, `property "username" validation failed: is required`},
		{"numeric username", "/apisix/admin/consumers", `{"username":7}`, `"username" validation failed`},
		{"bad username", "/apisix/admin/consumers", `{"username":"a.b"}`, `"username" validation failed`},
		{"username too long for an id", "/apisix/admin/consumers", `{"username":"` + strings.Repeat("u", 65) + `"}`, "1 to 64 characters"},
		{"unknown field", "/apisix/admin/consumers", `{"username":"a","uri":"/"}`, `property "uri" validation failed: unknown field`},
		{"unknown plugin", "/apisix/admin/consumers", `{"username":"a","plugins":{"nope":{}}}`,
			"invalid plugins configuration: unknown plugin [nope]"},
		{"key-auth without key", "/apisix/admin/consumers", `{"username":"a","plugins":{"key-auth":{}}}`,
			"invalid plugins configuration: failed to check the configuration of plugin key-auth err: key: is required"},
		{"key-auth route config", "/apisix/admin/consumers", `{"username":"a","plugins":{"key-auth":{"key":"k","header":"x"}}}`,
			"header: unknown field"},
		{"basic-auth without password", "/apisix/admin/consumers", `{"username":"a","plugins":{"basic-auth":{"username":"u"}}}`,
			"plugin basic-auth err: password: is required"},
		{"bad limit-count on a consumer", "/apisix/admin/consumers", `{"username":"a","plugins":{"limit-count":{"count":0,"time_window":60}}}`,
			"failed to check the configuration of plugin limit-count err: count: must be an integer > 0, got 0"},
		{"create_time given", "/apisix/admin/consumers", `{"username":"a","create_time":1}`, "the property is forbidden: create_time"},
		{"array body", "/apisix/admin/consumers", `[]`, "the body must be a JSON object"},
	}
	testRejectedPuts(t, cases)
}

func TestConsumerMethodsNotSupported(t *testing.T) {
	f := newFixture(t)
	f.call("PUT", "/apisix/admin/consumers", jack)
	for _, method := range []string{"POST", "PATCH"} {
		for _, target := range []string{"/apisix/admin/consumers", "/apisix/admin/consumers/jack"} {
			expect(t, f.call(method, target, `{"username":"jack"}`), 405,
				`{"error_msg":"not supported `+"`"+method+"`"+` method for consumer"}`)
		}
	}
}

func TestConsumerCredentialsUnique(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/consumers", jack), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/consumers", `{"username":"jill","plugins":{"key-auth":{"key":"auth-one"}}}`), 400,
		`{"error_msg":"duplicate key of plugin key-auth found with consumer: jack"}`)
	// A consumer may keep its own key when it is replaced.
	expect(t, f.call("PUT", "/apisix/admin/consumers/jack", jack), 200, "")
	expect(t, f.call("PUT", "/apisix/admin/consumers", `{"username":"jill","plugins":{"key-auth":{"key":"auth-two"}}}`), 201, "")

	expect(t, f.call("PUT", "/apisix/admin/consumers", `{"username":"a","plugins":{"basic-auth":{"username":"foo","password":"bar"}}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/consumers", `{"username":"b","plugins":{"basic-auth":{"username":"foo","password":"other"}}}`), 400,
		`{"error_msg":"duplicate username of plugin basic-auth found with consumer: a"}`)
	// Same value, different plugins: no conflict.
	expect(t, f.call("PUT", "/apisix/admin/consumers", `{"username":"c","plugins":{"key-auth":{"key":"foo"}}}`), 201, "")
}

// Keys given as $env:// references clash by their text and by the values workers will get
// from the master's environment; a reference without a value clashes with nothing else.
func TestConsumerCredentialsUniqueAcrossSecretReferences(t *testing.T) {
	t.Setenv("GW_TEST_KEY_A", "auth-one")
	t.Setenv("GW_TEST_KEY_B", "auth-one")
	t.Setenv("GW_TEST_CREDS", `{"key":"auth-one"}`)
	consumer := func(name, key string) string {
		return `{"username":"` + name + `","plugins":{"key-auth":{"key":"` + key + `"}}}`
	}
	cases := []struct {
		name, stored, written string
		clash                 bool
	}{
		{"reference to a plain key's value", "auth-one", "$env://GW_TEST_KEY_A", true},
		{"plain key equal to a reference's value", "$env://GW_TEST_KEY_A", "auth-one", true},
		{"two variables with one value", "$env://GW_TEST_KEY_A", "$env://GW_TEST_KEY_B", true},
		{"prefix in another case", "$env://GW_TEST_KEY_A", "$ENV://GW_TEST_KEY_A", true},
		{"member of a JSON value", "auth-one", "$env://GW_TEST_CREDS/key", true},
		{"the same unset reference", "$env://GW_TEST_UNSET", "$env://GW_TEST_UNSET", true},
		{"two unset references", "$env://GW_TEST_UNSET", "$env://GW_TEST_UNSET_2", false},
		{"unset reference and its text", "$env://GW_TEST_UNSET", "$ENV://GW_TEST_UNSET", false},
		{"other value", "$env://GW_TEST_KEY_A", "auth-two", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			expect(t, f.call("PUT", "/apisix/admin/consumers", consumer("jack", tc.stored)), 201, "")
			w := f.call("PUT", "/apisix/admin/consumers", consumer("jill", tc.written))
			if tc.clash {
				expect(t, w, 400, `{"error_msg":"duplicate key of plugin key-auth found with consumer: jack"}`)
			} else {
				expect(t, w, 201, "")
			}
		})
	}
}

// The store and GET keep a reference as written; workers get its value (the master
// resolves it, master/secrets.go), so the Admin API publishes the reference.
func TestConsumerSecretReferenceStoredAsWritten(t *testing.T) {
	t.Setenv("GW_TEST_KEY_A", "auth-one")
	f := newFixture(t)
	body := `{"username":"jack","plugins":{"key-auth":{"key":"$env://GW_TEST_KEY_A"}}}`
	expect(t, f.call("PUT", "/apisix/admin/consumers", body), 201, "")
	w := f.call("GET", "/apisix/admin/consumers/jack", "")
	if !strings.Contains(w.Body.String(), `"key":"$env://GW_TEST_KEY_A"`) {
		t.Errorf("GET shows %s, want the reference as written", w.Body)
	}
	if snap := f.pub.last(); snap == nil || !strings.Contains(string(snap.Consumers[0].Plugins["key-auth"]), "$env://GW_TEST_KEY_A") {
		t.Errorf("the Admin API published %+v, want the store's reference (the master resolves it)", snap)
	}
	for _, refused := range []struct{ body, want string }{
		{`{"username":"jill","plugins":{"key-auth":{"key":"$secret://vault/1/key"}}}`, "key: secret managers ($secret://) are not supported yet"},
		{`{"username":"jill","plugins":{"basic-auth":{"username":"jill","password":"$secret://aws/1/pw"}}}`, "password: secret managers ($secret://) are not supported yet"},
		{`{"username":"jill","plugins":{"key-auth":{"key":"$env://"}}}`, "the name after $env:// must be an environment variable name"},
	} {
		w := f.call("PUT", "/apisix/admin/consumers", refused.body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), refused.want) {
			t.Errorf("PUT %s: %d %s; want 400 saying %q", refused.body, w.Code, w.Body, refused.want)
		}
	}
}
