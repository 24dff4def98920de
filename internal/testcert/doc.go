// Package testcert makes X.509 certificates for tests, so that no private key is ever
// committed. A Cert is a certificate, its key and the parsed forms tests want (PEM text for
// config and Admin API bodies, a tls.Certificate for servers, the leaf for its serial). It is
// either self-signed (SelfSigned) or issued by a CA made for the test (NewCA, then Issue);
// a CA's Pool is what a client or server trusts. Options say only what a test cares about
// (names, key type, usages, validity, serial); everything else has a default: an ECDSA
// P-256 key, valid from an hour ago for a day, a random serial. Every failure ends the
// test through t.Fatal. The package is for tests only: import it from _test.go files,
// never from code that ships in the binary.
package testcert
