package integration

import (
	"fmt"
	"strings"
	"testing"
)

// A consumer's key-auth key and basic-auth password given as $env://NAME come from the
// master's environment: the value lets a client in, the reference's own text never does,
// and a reference to an unset variable matches no client. Workers started later (a
// reload) get the values too; GET keeps the references as written.
func TestSecretReferencesFromTheMastersEnvironment(t *testing.T) {
	// The master inherits the test's environment through gwctl start.
	t.Setenv("GW_ITEST_JACK_KEY", "jack-from-env")
	t.Setenv("GW_ITEST_CREDS", `{"password":"pw-from-env"}`)
	node := echoUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"$env://GW_ITEST_JACK_KEY"}}}`)
	in.mustPut("/apisix/admin/consumers", `{"username":"jill","plugins":{"key-auth":{"key":"$ENV://GW_ITEST_UNSET"},`+
		`"basic-auth":{"username":"jill","password":"$env://GW_ITEST_CREDS/password"}}}`)
	in.mustPut("/apisix/admin/consumers", `{"username":"rose","plugins":{"basic-auth":{"username":"rose","password":"$env://GW_ITEST_UNSET"}}}`)
	in.mustPut("/apisix/admin/routes/key", fmt.Sprintf(`{"uri":"/key","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, node))
	in.mustPut("/apisix/admin/routes/basic", fmt.Sprintf(`{"uri":"/basic","plugins":{"basic-auth":{}},"upstream":{"nodes":{%q:1}}}`, node))

	if status, body := in.adminCall("PUT", "/apisix/admin/consumers", `{"username":"x","plugins":{"key-auth":{"key":"$secret://vault/1/key"}}}`); status != 400 ||
		!strings.Contains(body, "secret managers ($secret://) are not supported yet") {
		t.Errorf("a $secret:// key: %d %s; want 400 saying secret managers are not supported", status, body)
	}
	if status, body := in.adminCall("PUT", "/apisix/admin/consumers", `{"username":"copy","plugins":{"key-auth":{"key":"jack-from-env"}}}`); status != 400 ||
		!strings.Contains(body, "duplicate key of plugin key-auth found with consumer: jack") {
		t.Errorf("a plain key equal to jack's resolved one: %d %s; want 400 duplicate", status, body)
	}
	if _, body := in.adminCall("GET", "/apisix/admin/consumers/jack", ""); !strings.Contains(body, `"key":"$env://GW_ITEST_JACK_KEY"`) {
		t.Errorf("GET jack = %s; want the reference as written", body)
	}

	exchanges := []struct {
		path    string
		headers []string
		status  int
	}{
		{"/key", []string{"apikey", "jack-from-env"}, 200},
		{"/key", []string{"apikey", "$env://GW_ITEST_JACK_KEY"}, 401},
		{"/key", []string{"apikey", "$ENV://GW_ITEST_UNSET"}, 401},
		{"/key", []string{"apikey", "$env://GW_ITEST_UNSET"}, 401},
		{"/basic", []string{"Authorization", basicAuth("jill", "pw-from-env")}, 200},
		{"/basic", []string{"Authorization", basicAuth("jill", "$env://GW_ITEST_CREDS/password")}, 401},
		{"/basic", []string{"Authorization", basicAuth("rose", "$env://GW_ITEST_UNSET")}, 401},
	}
	check := func(when string) {
		t.Helper()
		for _, x := range exchanges {
			if resp, body := in.get(x.path, x.headers...); resp.StatusCode != x.status {
				t.Errorf("%s: GET %s with %s %q = %d %s; want %d", when, x.path, x.headers[0], x.headers[1], resp.StatusCode, body, x.status)
			}
		}
	}
	check("after the writes")
	in.reload()
	check("after a reload")
	if log := in.errorLog(); !strings.Contains(log, `consumer "rose": basic-auth.password: $env://GW_ITEST_UNSET has no value`) ||
		strings.Contains(log, "jack-from-env") || strings.Contains(log, "pw-from-env") {
		t.Errorf("error.log should name rose's unresolved password and no value:\n%s", lastLines(log, 20))
	}
}
