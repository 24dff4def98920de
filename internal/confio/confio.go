// Package confio does the I/O that config.yaml's values ask for and conf, which only
// decodes and checks text, does not: it reads the CA bundle ssl.ssl_trusted_certificate
// names and looks up the user and group `user` names. Check runs both for gwctl test,
// gwctl start and a reload, so that a missing file or an unknown user is reported with
// its key before any worker fails on it; the worker and the master then use
// TrustedCertificates and LookupUser for what they build. Safe for concurrent use.
package confio

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"gw/conf"
)

// Check reads and looks up what c names on this system, as the master and the workers
// will: the CA bundle of ssl.ssl_trusted_certificate (relative to prefix unless absolute)
// and the user and group of user. The error names the key and the value.
func Check(c *conf.Config, prefix string) error {
	if _, err := TrustedCertificates(prefix, c.SSLTrustedCertificate); err != nil {
		return err
	}
	if err := checkUser(c.User); err != nil {
		return fmt.Errorf("user: %w, got %q", err, c.User)
	}
	return nil
}

// checkUser looks up nginx's "user name [group]", which conf has checked is one or two
// words, so that gwctl test catches a typo as nginx -t does. Empty means not set.
func checkUser(spec string) error {
	fields := strings.Fields(spec)
	if len(fields) > 0 {
		if _, err := LookupUser(fields[0]); err != nil {
			return err
		}
	}
	if len(fields) > 1 {
		if _, err := LookupGroup(fields[1]); err != nil {
			return err
		}
	}
	return nil
}

// TrustedCertificates returns the roots that upstream certificates are verified against:
// the system's, plus the CA certificates in the PEM file at path (relative to prefix
// unless absolute). An empty path gives nil, which crypto/tls reads as the system roots.
// A file that cannot be read, or holds anything but certificates, is an error that names
// it and the key.
func TrustedCertificates(prefix, path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(prefix, path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssl.%s: %w", conf.TrustedCertificateKey, err)
	}
	certs, err := conf.ParseCertificates(string(text))
	if err != nil {
		return nil, fmt.Errorf("ssl.%s: %s: %v", conf.TrustedCertificateKey, path, err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool() // no system store here: the file's CAs alone
	}
	for _, c := range certs {
		roots.AddCert(c)
	}
	return roots, nil
}

// LookupUser finds a user by name, or by numeric id as nginx's user directive allows.
func LookupUser(name string) (*user.User, error) {
	if isDecimal(name) {
		u, err := user.LookupId(name)
		if err != nil {
			return nil, fmt.Errorf("no user with id %s on this system", name)
		}
		return u, nil
	}
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return nil, fmt.Errorf("no user %q on this system", name)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up user %q: %w", name, err)
	}
	return u, nil
}

// LookupGroup finds a group by name or numeric id.
func LookupGroup(name string) (*user.Group, error) {
	if isDecimal(name) {
		g, err := user.LookupGroupId(name)
		if err != nil {
			return nil, fmt.Errorf("no group with id %s on this system", name)
		}
		return g, nil
	}
	g, err := user.LookupGroup(name)
	var unknown user.UnknownGroupError
	if errors.As(err, &unknown) {
		return nil, fmt.Errorf("no group %q on this system", name)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up group %q: %w", name, err)
	}
	return g, nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
