package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gw/conf"
)

// recordingLog keeps every warning.
type recordingLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLog) Warnf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// syncBuffer is an audit sink safe for the concurrent writes of a test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) records(t *testing.T) []auditRecord {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var recs []auditRecord
	for _, line := range strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var rec auditRecord
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// guardedFixture is the usual fixture with an error log and an audit log attached.
func guardedFixture(t *testing.T) (*fixture, *recordingLog, *syncBuffer) {
	f := newFixture(t)
	log, audit := &recordingLog{}, &syncBuffer{}
	f.h = New(Options{
		Store: f.store,
		Keys: []conf.AdminKey{
			{Name: "ops", Key: adminKey, Role: "admin"},
			{Name: "dashboard", Key: viewerKey, Role: "viewer"},
		},
		Allow:     f.h.opts.Allow,
		Publisher: f.pub,
		Log:       log,
		Audit:     audit,
	})
	f.h.now = func() time.Time { return f.clock }
	return f, log, audit
}

func TestRefusedKeysAreLoggedWithThePeerNeverTheToken(t *testing.T) {
	cases := []struct {
		name, method string
		key          string
		wantStatus   int
		wantLog      []string // "" entries: no log line expected
	}{
		{"right key", "PUT", adminKey, 201, nil},
		{"viewer reads", "GET", viewerKey, 404, nil}, // no such route, but the key passed
		{"wrong key", "GET", "guess-1234", 401, []string{"refused GET /apisix/admin/routes/1 from 127.0.0.9:4711 (no matching key): wrong apikey"}},
		{"missing key", "PUT", "", 401, []string{"from 127.0.0.9:4711 (no matching key): missing apikey"}},
		{"viewer writes", "PUT", viewerKey, 401, []string{`from 127.0.0.9:4711 (key "dashboard"): invalid method for role viewer`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, log, _ := guardedFixture(t)
			header := map[string]string{}
			if tc.key != "" {
				header["X-API-KEY"] = tc.key
			}
			w := f.callWith(f.h, tc.method, "/apisix/admin/routes/1", hello, "127.0.0.9:4711", header)
			if w.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			if len(log.lines) != len(tc.wantLog) {
				t.Fatalf("log = %q, want %d line(s)", log.lines, len(tc.wantLog))
			}
			for i, want := range tc.wantLog {
				if !strings.Contains(log.lines[i], want) {
					t.Errorf("log line %q does not contain %q", log.lines[i], want)
				}
				if tc.key != "" && strings.Contains(log.lines[i], tc.key) {
					t.Errorf("log line %q holds the token", log.lines[i])
				}
			}
		})
	}
}

func TestAuditRecordsEveryWrite(t *testing.T) {
	f, _, audit := guardedFixture(t)
	admin := map[string]string{"X-API-KEY": adminKey}
	viewer := map[string]string{"X-API-KEY": viewerKey}
	peer := "127.0.0.1:5000"
	f.callWith(f.h, "PUT", "/apisix/admin/upstreams/u", `{"nodes":{"127.0.0.1:80":1}}`, peer, admin)
	f.callWith(f.h, "GET", "/apisix/admin/upstreams/u", "", peer, admin) // not a write
	post := f.callWith(f.h, "POST", "/apisix/admin/routes", `{"uri":"/p","upstream_id":"u"}`, peer, admin)
	f.callWith(f.h, "PATCH", "/apisix/admin/upstreams/u", `{"desc":"x"}`, peer, admin)
	f.callWith(f.h, "PUT", "/apisix/admin/routes/9", `{"uri":5}`, peer, admin)
	f.callWith(f.h, "DELETE", "/apisix/admin/routes/9", "", peer, viewer)
	f.callWith(f.h, "DELETE", "/apisix/admin/routes/9", "", peer, map[string]string{"X-API-KEY": "nope"})
	f.callWith(f.h, "PUT", "/apisix/admin/routes/9", hello, "10.1.1.1:1", admin)
	f.callWith(f.h.Internal(), "DELETE", "/apisix/admin/upstreams/u?force=true", "", "@", admin)

	var created item
	if err := json.Unmarshal(post.Body.Bytes(), &created); err != nil || created.Key == "" {
		t.Fatalf("POST answered %s", post.Body)
	}
	want := []auditRecord{
		{Key: "ops", Peer: peer, Method: "PUT", Resource: "/apisix/admin/upstreams/u", Status: 201},
		{Key: "ops", Peer: peer, Method: "POST", Resource: "/apisix/admin" + strings.TrimPrefix(created.Key, "/apisix"), Status: 201},
		{Key: "ops", Peer: peer, Method: "PATCH", Resource: "/apisix/admin/upstreams/u", Status: 200},
		{Key: "ops", Peer: peer, Method: "PUT", Resource: "/apisix/admin/routes/9", Status: 400},
		{Key: "dashboard", Peer: peer, Method: "DELETE", Resource: "/apisix/admin/routes/9", Status: 401},
		{Key: "", Peer: peer, Method: "DELETE", Resource: "/apisix/admin/routes/9", Status: 401},
		{Key: "", Peer: "10.1.1.1:1", Method: "PUT", Resource: "/apisix/admin/routes/9", Status: 403},
		{Key: "ops", Peer: forwardedPeer, Method: "DELETE", Resource: "/apisix/admin/upstreams/u", Status: 200},
	}
	got := audit.records(t)
	if len(got) != len(want) {
		t.Fatalf("audit has %d records, want %d:\n%+v", len(got), len(want), got)
	}
	stamp := f.clock.UTC().Format(time.RFC3339Nano)
	for i := range want {
		want[i].Time = stamp
		if got[i] != want[i] {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestBodyCap(t *testing.T) {
	// The body is the route JSON padded with spaces to exactly n bytes.
	bodyOf := func(n int) string {
		route := `{"uri":"/a","plugins":{}}`
		return route + strings.Repeat(" ", n-len(route))
	}
	cases := []struct {
		name       string
		size       int
		wantStatus int
	}{
		{"small", 100, 201},
		{"exactly 1.5 MiB", maxBodyBytes, 201},
		{"one byte over", maxBodyBytes + 1, 413},
		{"far over", 4 * maxBodyBytes, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.call("PUT", "/apisix/admin/routes/1", bodyOf(tc.size))
			if w.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%.200s)", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantStatus == 413 {
				expect(t, w, 413, `{"error_msg":"request body too large: the Admin API accepts at most 1572864 bytes (1.5 MiB, as APISIX)"}`)
				if f.store.Revision() != 0 {
					t.Error("a refused body changed the store")
				}
			}
		})
	}
}
