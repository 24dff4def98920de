package conf

import "testing"

// scheme grpc and grpcs are accepted, normalised to their Scheme, with grpcs keeping its
// tls and defaulting to port 443 as https does, grpc to 80.
func TestGRPCSchemesNormalize(t *testing.T) {
	for _, tc := range []struct {
		body   string
		scheme Scheme
		port   int
		tls    bool
	}{
		{`{"scheme":"grpc","nodes":[{"host":"a","weight":1}]}`, SchemeGRPC, 80, false},
		{`{"scheme":"grpcs","tls":{"verify":false},"nodes":[{"host":"a","weight":1}]}`, SchemeGRPCS, 443, true},
		{`{"scheme":"grpc","checks":{"active":{"type":"tcp"}},"nodes":{"a:50051":1}}`, SchemeGRPC, 50051, false},
	} {
		u, err := DecodeUpstream([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		n, err := u.Normalize(nil)
		if err != nil {
			t.Fatalf("%s: Normalize: %v", tc.body, err)
		}
		if n.Scheme != tc.scheme || !n.Scheme.IsGRPC() || n.Nodes[0].Port != tc.port || (n.TLS != nil) != tc.tls {
			t.Errorf("%s: scheme %v port %d tls %v, want %v %d %v", tc.body, n.Scheme, n.Nodes[0].Port, n.TLS != nil, tc.scheme, tc.port, tc.tls)
		}
		if n.Scheme.Secure() != (tc.scheme == SchemeGRPCS) {
			t.Errorf("%s: Secure() = %v", tc.body, n.Scheme.Secure())
		}
	}
}
