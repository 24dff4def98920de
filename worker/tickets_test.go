package worker

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"strings"
	"testing"

	"gw/conf"
)

func randomTicketKey(t testing.TB) []byte {
	k := make([]byte, ticketKeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDecodeTicketKeys(t *testing.T) {
	one, two := randomTicketKey(t), randomTicketKey(t)
	tooMany := make([][]byte, maxTicketKeys+1)
	for i := range tooMany {
		tooMany[i] = one
	}
	tests := []struct {
		name string
		raw  [][]byte
		err  string // "" accepts
	}{
		{"one key", [][]byte{one}, ""},
		{"the rotation's three", [][]byte{one, two, one}, ""},
		{"as many as allowed", tooMany[:maxTicketKeys], ""},
		{"none", nil, "ticket_keys: want 1 to 16 keys, got 0"},
		{"too many", tooMany, "ticket_keys: want 1 to 16 keys, got 17"},
		{"short key", [][]byte{one, two[:31]}, "ticket_keys item 2: want 32 bytes, got 31"},
		{"long key", [][]byte{append(bytes.Clone(one), 0)}, "ticket_keys item 1: want 32 bytes, got 33"},
		{"empty key", [][]byte{{}}, "ticket_keys item 1: want 32 bytes, got 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := decodeTicketKeys(tc.raw)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range keys {
				if !bytes.Equal(keys[i][:], tc.raw[i]) {
					t.Fatalf("key %d changed on the way", i+1)
				}
			}
		})
	}
}

// resumes connects a client to store and reports whether the session resumed.
func resumes(t testing.TB, store *certStore, sni string, client *tls.Config) bool {
	t.Helper()
	state, err := connect(t, store, sni, client)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return state.DidResume
}

// newTicketTestStore is one worker's certificate store: the same certificates for every
// worker, as the master sends every worker the same snapshot.
func newTicketTestStore(t testing.TB, ssls []conf.SSL, keys ...[]byte) *certStore {
	t.Helper()
	store := newCertStore("", testLog())
	table, pairs, leftOut := store.compile(ssls)
	if leftOut != nil {
		t.Fatal(leftOut)
	}
	store.commit(table, pairs)
	if len(keys) > 0 {
		if err := store.setTicketKeys(keys); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// TestTicketsResumeAcrossWorkers: two workers with the master's keys resume each other's
// sessions, TLS 1.2 tickets and TLS 1.3 PSKs alike; with keys of their own they do not.
func TestTicketsResumeAcrossWorkers(t *testing.T) {
	a := newECCert(t, "a.test")
	ssls := []conf.SSL{{ID: "1", Cert: a.cert, Key: a.key, SNI: "a.test"}}
	current, previous := randomTicketKey(t), randomTicketKey(t)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		name := map[uint16]string{tls.VersionTLS12: "tls12", tls.VersionTLS13: "tls13"}[version]
		t.Run(name, func(t *testing.T) {
			tests := []struct {
				name         string
				issuer, next [][]byte // nil: crypto/tls's own per-process keys
				want         bool
			}{
				{"same keys", [][]byte{current}, [][]byte{current}, true},
				{"issued before a rotation", [][]byte{previous}, [][]byte{current, previous}, true},
				{"issued by a worker that missed the rotation", [][]byte{previous}, [][]byte{current}, false},
				{"per-process keys", nil, nil, false},
				{"other worker has its own keys", [][]byte{current}, nil, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					issuer := newTicketTestStore(t, ssls, tc.issuer...)
					next := newTicketTestStore(t, ssls, tc.next...)
					client := &tls.Config{MinVersion: version, MaxVersion: version, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
					if resumes(t, issuer, "a.test", client) {
						t.Fatal("the first connection resumed")
					}
					if !resumes(t, issuer, "a.test", client) {
						t.Fatal("no resumption on the issuing worker itself")
					}
					if got := resumes(t, next, "a.test", client); got != tc.want {
						t.Fatalf("resumed on the other worker: %t, want %t", got, tc.want)
					}
				})
			}
		})
	}
}

// TestTicketKeysSurviveASnapshot: the keys are the listener's, so a new snapshot (new
// per-ssl configs) keeps resuming.
func TestTicketKeysSurviveASnapshot(t *testing.T) {
	a, b := newECCert(t, "a.test"), newECCert(t, "b.test")
	key := randomTicketKey(t)
	store := newTicketTestStore(t, []conf.SSL{{ID: "1", Cert: a.cert, Key: a.key, SNI: "a.test"}}, key)
	client := &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	resumes(t, store, "a.test", client)
	table, pairs, leftOut := store.compile([]conf.SSL{
		{ID: "1", Cert: a.cert, Key: a.key, SNI: "a.test"},
		{ID: "2", Cert: b.cert, Key: b.key, SNI: "b.test"},
	})
	if leftOut != nil {
		t.Fatal(leftOut)
	}
	store.commit(table, pairs)
	if !resumes(t, store, "a.test", client) {
		t.Fatal("a session from before the snapshot did not resume")
	}
}

// TestBadTicketKeysChangeNothing: a set the worker refuses leaves the old keys serving.
func TestBadTicketKeysChangeNothing(t *testing.T) {
	a := newECCert(t, "a.test")
	key := randomTicketKey(t)
	store := newTicketTestStore(t, []conf.SSL{{ID: "1", Cert: a.cert, Key: a.key, SNI: "a.test"}}, key)
	client := &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	resumes(t, store, "a.test", client)
	err := store.setTicketKeys([][]byte{randomTicketKey(t), key[:16]})
	if err == nil || !strings.Contains(err.Error(), "item 2") {
		t.Fatalf("setTicketKeys with a short key: %v, want an error naming item 2", err)
	}
	if !resumes(t, store, "a.test", client) {
		t.Fatal("refused keys replaced the old ones")
	}
}

// BenchmarkResumeOnAnotherWorker is what shared keys buy: a client alternating between two
// workers resumes every time with the master's keys, and makes a full handshake every time
// with per-process keys. Client and server both run here.
func BenchmarkResumeOnAnotherWorker(b *testing.B) {
	c := newECCert(b, "a.test")
	ssls := []conf.SSL{{ID: "1", Cert: c.cert, Key: c.key, SNI: "a.test"}}
	key := randomTicketKey(b)
	for _, bc := range []struct {
		name string
		keys [][]byte
	}{{"shared-keys", [][]byte{key}}, {"per-process-keys", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			workers := []*certStore{newTicketTestStore(b, ssls, bc.keys...), newTicketTestStore(b, ssls, bc.keys...)}
			client := &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			resumes(b, workers[1], "a.test", client)
			resumed, i := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				if resumes(b, workers[i%2], "a.test", client) {
					resumed++
				}
				i++
			}
			b.ReportMetric(float64(resumed)/float64(i), "resumed/op")
		})
	}
}
