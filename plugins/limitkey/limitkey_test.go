package limitkey

import (
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/plugins"
	"gw/shm"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct{ keyType, key, err string }{
		{"var", "remote_addr", ""},
		{"var", "http_x_user", ""},
		{"var", "", ""},
		{"var_combination", "$remote_addr $http_x_user", ""},
		{"var", "no_such_var", "key: "},
		{"var_combination", "$no_such_var", "key: "},
		{"constant", "x", "key: key_type"},
	} {
		_, err := Parse(tt.keyType, tt.key)
		if (err == nil) != (tt.err == "") || err != nil && !strings.HasPrefix(err.Error(), tt.err) {
			t.Errorf("Parse(%q, %q) = %v, want %q", tt.keyType, tt.key, err, tt.err)
		}
	}
}

// fingerprint is the key's fingerprint for a request from client with X-User user ("":
// none).
func fingerprint(t *testing.T, keyType, key, client, user string) uint64 {
	t.Helper()
	k, err := Parse(keyType, key)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSource(shm.NewKeyHash(42), k)
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(client), Port: 1}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	return s.Fingerprint(c)
}

func TestFingerprint(t *testing.T) {
	ann := fingerprint(t, "var", "http_x_user", "10.0.0.1", "ann")
	if fingerprint(t, "var", "http_x_user", "10.0.0.2", "ann") != ann {
		t.Error("one user from two addresses has two keys")
	}
	if fingerprint(t, "var", "http_x_user", "10.0.0.1", "bob") == ann {
		t.Error("two users share a key")
	}
	// No value: the client's address, as APISIX.
	if fingerprint(t, "var", "http_x_user", "10.0.0.1", "") != fingerprint(t, "var", "remote_addr", "10.0.0.1", "") {
		t.Error("a missing header is not the client's address")
	}
	if fingerprint(t, "var_combination", "$http_x_user", "10.0.0.1", "") != fingerprint(t, "var", "remote_addr", "10.0.0.1", "") {
		t.Error("a combination with nothing resolved is not the client's address")
	}
	if fingerprint(t, "var_combination", "$remote_addr $http_x_user", "10.0.0.1", "ann") ==
		fingerprint(t, "var_combination", "$remote_addr $http_x_user", "10.0.0.1", "bob") {
		t.Error("a combination ignores a part")
	}
}
