package worker

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"strings"
	"sync/atomic"

	"gw/conf"
	"gw/internal/errlog"
)

// modernCipherSuites are the TLS 1.2 suites served: forward-secret key exchange and AEAD
// only (Mozilla's "intermediate" list). TLS 1.3 suites are not configurable, and all are
// AEAD.
var modernCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// certStore chooses the certificate for each TLS handshake from the ssls objects of the
// snapshot the worker serves. The table is swapped atomically with the route table, so a
// write acknowledged to the Admin API is what the next handshake sees.
type certStore struct {
	// listener is the config the TLS listeners are built with: it holds no certificate,
	// only the choice of a per-ssl config per ClientHello.
	listener    *tls.Config
	table       atomic.Pointer[certTable]
	fallbackSNI string
	log         *errlog.Logger

	// pairs caches parsed certificates by the digest of their PEM text, so that a snapshot
	// that leaves an ssl alone does not parse its key again. Only compile and commit touch
	// it, under the worker's compileMu.
	pairs map[[sha256.Size]byte]*tls.Certificate
}

// certTable is one snapshot's certificates by name. Immutable once built.
type certTable struct {
	exact map[string]*tls.Config
	// wildcard is keyed by the name after "*.": "example.com" for *.example.com.
	wildcard map[string]*tls.Config
	// fallback serves names no ssl has, and clients that send none; nil unless
	// ssl.fallback_sni names a certificate of this table.
	fallback *tls.Config
	// none has no certificate: crypto/tls then fails the handshake with the
	// unrecognized_name alert, and no other name's certificate is ever shown.
	none *tls.Config
}

func newCertStore(fallbackSNI string, log *errlog.Logger) *certStore {
	s := &certStore{fallbackSNI: fallbackSNI, log: log, pairs: map[[sha256.Size]byte]*tls.Certificate{}}
	s.listener = serverTLSConfig()
	s.listener.GetConfigForClient = s.configFor
	s.table.Store(&certTable{none: serverTLSConfig()})
	return s
}

// serverTLSConfig is what every served config shares: TLS 1.2 and 1.3, modern suites, and
// HTTP/2 then HTTP/1.1 by ALPN (h2 is served by http2.go, through fasthttp's NextProto).
func serverTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: modernCipherSuites,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// configFor is the listener's GetConfigForClient. Session tickets stay the listener's: a
// returned config without its own ticket keys uses the original config's.
func (s *certStore) configFor(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	return s.table.Load().lookup(hello.ServerName), nil
}

// lookup returns the config for a client's SNI: the exact name, else the wildcard for its
// parent, else the fallback, else none. A client sends no trailing dot (crypto/tls refuses
// one), but may send capitals.
func (t *certTable) lookup(sni string) *tls.Config {
	if sni != "" {
		if hasUpper(sni) {
			sni = strings.ToLower(sni)
		}
		if c, ok := t.exact[sni]; ok {
			return c
		}
		if dot := strings.IndexByte(sni, '.'); dot > 0 {
			if c, ok := t.wildcard[sni[dot+1:]]; ok {
				return c
			}
		}
	}
	if t.fallback != nil {
		return t.fallback
	}
	return t.none
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// compile builds the table for ssls without swapping it in. An ssl whose certificates
// do not all load is left out (named in leftOut) and serves no name; the others are
// built. Two ssls with one name cannot be stored through the Admin API; should the data
// directory hold them anyway, the older one (earlier in the snapshot) keeps the name.
func (s *certStore) compile(ssls []conf.SSL) (*certTable, map[[sha256.Size]byte]*tls.Certificate, []conf.LeftOut) {
	t := &certTable{
		exact:    map[string]*tls.Config{},
		wildcard: map[string]*tls.Config{},
		none:     serverTLSConfig(),
	}
	pairs := make(map[[sha256.Size]byte]*tls.Certificate, len(s.pairs))
	var leftOut []conf.LeftOut
	for i := range ssls {
		ssl := &ssls[i]
		if !ssl.Serves() {
			continue
		}
		var cfg *tls.Config
		if err := guard(s.log.Errorf, func() (err error) {
			cfg, err = s.configOf(ssl, pairs)
			return err
		}); err != nil {
			leftOut = append(leftOut, conf.LeftOut{Kind: "ssls", ID: ssl.ID, Reason: err.Error()})
			continue
		}
		for _, name := range ssl.Names() {
			byName, key := t.exact, name
			if suffix, ok := strings.CutPrefix(name, "*."); ok {
				byName, key = t.wildcard, suffix
			}
			if _, taken := byName[key]; taken {
				s.log.Warnf("ssls/%s: sni %q is also an older ssl's; that one keeps it", ssl.ID, name)
				continue
			}
			byName[key] = cfg
		}
	}
	if s.fallbackSNI != "" {
		if c := t.lookup(s.fallbackSNI); c != t.none {
			t.fallback = c
		}
	}
	return t, pairs, leftOut
}

// configOf is the served config of one ssl, its pairs parsed into pairs.
func (s *certStore) configOf(ssl *conf.SSL, pairs map[[sha256.Size]byte]*tls.Certificate) (*tls.Config, error) {
	if err := ssl.UnresolvedRef(); err != nil {
		return nil, err // said in words, rather than as PEM that does not parse
	}
	cfg := serverTLSConfig()
	if err := s.addPair(cfg, pairs, ssl.Cert, ssl.Key); err != nil {
		return nil, fmt.Errorf("cert: %w", err)
	}
	if len(ssl.Certs) != len(ssl.Keys) {
		return nil, fmt.Errorf("certs: %d certificates but %d keys", len(ssl.Certs), len(ssl.Keys))
	}
	for j := range ssl.Certs {
		if err := s.addPair(cfg, pairs, ssl.Certs[j], ssl.Keys[j]); err != nil {
			return nil, fmt.Errorf("certs item %d: %w", j+1, err)
		}
	}
	if len(ssl.SSLProtocols) > 0 {
		cfg.MinVersion, cfg.MaxVersion = tlsVersions(ssl.SSLProtocols)
	}
	return cfg, nil
}

// addPair parses one certificate and key, or takes them from the cache, into cfg and the
// next cache. crypto/tls's errors hold no key material.
func (s *certStore) addPair(cfg *tls.Config, next map[[sha256.Size]byte]*tls.Certificate, certPEM, keyPEM string) error {
	h := sha256.New()
	h.Write([]byte(certPEM))
	h.Write([]byte{0})
	h.Write([]byte(keyPEM))
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	pair, ok := s.pairs[digest]
	if !ok {
		parsed, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
		if err != nil {
			return err
		}
		pair = &parsed
	}
	next[digest] = pair
	cfg.Certificates = append(cfg.Certificates, *pair)
	return nil
}

// commit swaps in a compiled table; handshakes from now on use it, those in progress
// finish with the one they started with.
func (s *certStore) commit(t *certTable, pairs map[[sha256.Size]byte]*tls.Certificate) {
	s.table.Store(t)
	s.pairs = pairs
}

// tlsVersions turns an ssl's ssl_protocols (validated: TLSv1.2, TLSv1.3) into bounds.
func tlsVersions(protocols []string) (lowest, highest uint16) {
	lowest, highest = tls.VersionTLS13, tls.VersionTLS12
	for _, p := range protocols {
		v := uint16(tls.VersionTLS12)
		if p == conf.TLSv13 {
			v = tls.VersionTLS13
		}
		lowest, highest = min(lowest, v), max(highest, v)
	}
	return lowest, highest
}
