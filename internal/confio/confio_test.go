package confio

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gw/conf"
	"gw/internal/testcert"
)

// writeFiles writes each name (relative to prefix) with its text.
func writeFiles(t *testing.T, prefix string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		path := filepath.Join(prefix, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Check reads the CA bundle config.yaml names, relative to the prefix, and looks up its
// user, and names the key and the value of what is missing or broken.
func TestCheck(t *testing.T) {
	prefix := t.TempDir()
	ca := testcert.NewCA(t, "ca.example")
	writeFiles(t, prefix, map[string]string{"conf/ca.pem": ca.CertPEM, "conf/key.pem": ca.KeyPEM, "conf/junk.pem": "not PEM at all\n"})
	tests := []struct {
		path, user string
		wantErr    string // "" accepts
	}{
		{"", "", ""},
		{"conf/ca.pem", "", ""},
		{filepath.Join(prefix, "conf/ca.pem"), "", ""},
		{"", "root", ""},
		{"", "0 0", ""},
		{"conf/missing.pem", "", "ssl.ssl_trusted_certificate: open " + filepath.Join(prefix, "conf/missing.pem") + ": no such file"},
		{"/nowhere/ca.pem", "", "ssl.ssl_trusted_certificate: open /nowhere/ca.pem: no such file"},
		{"conf", "", "ssl.ssl_trusted_certificate: read " + filepath.Join(prefix, "conf") + ": is a directory"},
		{"conf/key.pem", "", "ssl.ssl_trusted_certificate: " + filepath.Join(prefix, "conf/key.pem") + `: failed to parse cert: PEM block 1 is "PRIVATE KEY"`},
		{"conf/junk.pem", "", "ssl.ssl_trusted_certificate: " + filepath.Join(prefix, "conf/junk.pem") + ": "},
		// Once conf's loader's, which read /etc/passwd while parsing.
		{"", "no-such-user-gw", `user: no user "no-such-user-gw" on this system, got "no-such-user-gw"`},
		{"", "4000000000", `user: no user with id 4000000000 on this system, got "4000000000"`},
		{"", "root no-such-group-gw", `user: no group "no-such-group-gw" on this system, got "root no-such-group-gw"`},
	}
	for _, tt := range tests {
		c := conf.Default()
		c.SSLTrustedCertificate, c.User = tt.path, tt.user
		err := Check(c, prefix)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q, user %q: %v", tt.path, tt.user, err)
		case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
			t.Errorf("%q, user %q: error %v, want %q", tt.path, tt.user, err, tt.wantErr)
		}
	}
}

func TestTrustedCertificates(t *testing.T) {
	prefix := t.TempDir()
	ca := testcert.NewCA(t, "ca.example")
	leaf := ca.Issue(t, testcert.Options{Names: []string{"a.example"}})
	writeFiles(t, prefix, map[string]string{"conf/ca.pem": ca.CertPEM, "conf/key.pem": ca.KeyPEM})

	if roots, err := TrustedCertificates(prefix, ""); roots != nil || err != nil {
		t.Errorf("empty path: %v %v, want nil (the system roots)", roots, err)
	}
	for _, path := range []string{"conf/ca.pem", filepath.Join(prefix, "conf/ca.pem")} {
		roots, err := TrustedCertificates(prefix, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "a.example"}); err != nil {
			t.Errorf("%s: the file's CA is not trusted: %v", path, err)
		}
	}
	for _, tt := range []struct{ path, want string }{
		{"conf/missing.pem", "ssl.ssl_trusted_certificate: open " + filepath.Join(prefix, "conf/missing.pem")},
		{"conf/key.pem", "ssl.ssl_trusted_certificate: " + filepath.Join(prefix, "conf/key.pem") + `: failed to parse cert: PEM block 1 is "PRIVATE KEY"`},
	} {
		_, err := TrustedCertificates(prefix, tt.path)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.path, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY-----") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}
