package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// gzip through the real binary: a text body compressed for a client that accepts it,
// plain for one that does not, never twice, and a streamed body left as it comes.
func TestGzip(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Repeat("<p>hello world</p>\n", 100)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/encoded":
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			io.WriteString(zw, page)
			zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(b.Bytes())
		case "/big":
			io.WriteString(w, strings.Repeat(page, 30)) // 57 KiB, chunked: streamed
		case "/big-length":
			big := strings.Repeat(page, 300) // 570 KiB with its length: streamed
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			w.Header().Set("ETag", `"big"`)
			io.WriteString(w, big)
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":"`+strings.Repeat("b", 100)+`"}`)
		default:
			io.WriteString(w, page)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	in := newInstance(t, "")
	in.start("--workers", "2")
	// t/plugin/gzip.t TEST 17 "vary", on the default types (text/html).
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/*","plugins":{"gzip":{"vary":true,"comp_level":6}},"upstream":{"nodes":{%q:1}}}`, ln.Addr()))

	unzip := func(what, body string) string {
		zr, err := gzip.NewReader(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: not gzip: %v", what, err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return string(plain)
	}
	in.overBothProtocols(func() {
		// TEST 2 "hit".
		resp, body := in.get("/page", "Accept-Encoding", "gzip, br")
		if resp.Header.Get("Content-Encoding") != "gzip" || unzip("/page", body) != page || len(body) >= len(page)/4 {
			t.Errorf("/page: Content-Encoding %q, %d bytes for %d", resp.Header.Get("Content-Encoding"), len(body), len(page))
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("/page: Vary %q", resp.Header.Get("Vary"))
		}
		resp, body = in.get("/page", "Accept-Encoding", "identity")
		if resp.Header.Get("Content-Encoding") != "" || body != page {
			t.Errorf("/page without gzip accepted: Content-Encoding %q, %d bytes", resp.Header.Get("Content-Encoding"), len(body))
		}
		// Never what is encoded already: the node's gzip once, not twice.
		resp, body = in.get("/encoded", "Accept-Encoding", "gzip")
		if resp.Header.Get("Content-Encoding") != "gzip" || unzip("/encoded", body) != page {
			t.Errorf("/encoded: Content-Encoding %q, not the node's gzip", resp.Header.Get("Content-Encoding"))
		}
		// TEST 12 "not hit": a type not listed.
		resp, body = in.get("/json", "Accept-Encoding", "gzip")
		if resp.Header.Get("Content-Encoding") != "" || !strings.HasPrefix(body, `{"a":`) {
			t.Errorf("/json: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		// A streamed body is compressed as it streams, chunked, the node's length or not.
		for path, want := range map[string]string{"/big": strings.Repeat(page, 30), "/big-length": strings.Repeat(page, 300)} {
			for range 2 { // and the node's connection, read to the end, serves the next
				resp, body = in.get(path, "Accept-Encoding", "gzip")
				if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength != -1 || len(body) > len(want)/10 {
					t.Fatalf("%s: Content-Encoding %q, length %d, %d bytes for %d", path, resp.Header.Get("Content-Encoding"), resp.ContentLength, len(body), len(want))
				}
				if got := unzip(path, body); got != want {
					t.Fatalf("%s: unzips to %d bytes, want %d", path, len(got), len(want))
				}
			}
		}
		if resp, _ = in.get("/big-length", "Accept-Encoding", "gzip"); resp.Header.Get("ETag") != `W/"big"` {
			t.Errorf("/big-length: ETag %q, want the node's made weak", resp.Header.Get("ETag"))
		}
		// A client that takes no gzip gets it as it came, its length kept.
		if resp, body = in.get("/big-length", "Accept-Encoding", "identity"); resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != int64(len(page)*300) || body != strings.Repeat(page, 300) {
			t.Errorf("/big-length without gzip: Content-Encoding %q, length %d, %d bytes", resp.Header.Get("Content-Encoding"), resp.ContentLength, len(body))
		}
	})
	// And through curl over h2c, which asks for gzip and unzips what comes.
	if v, status, body := curlH2(t, "--http2-prior-knowledge", "--compressed", "-D", "-", "http://"+in.data+"/big-length"); v != "2" || status != "200" ||
		!strings.Contains(strings.ToLower(body), "content-encoding: gzip") || !strings.HasSuffix(body, strings.Repeat(page, 300)) {
		t.Errorf("/big-length over h2c: HTTP/%s %s, %d bytes, gzip %v", v, status, len(body), strings.Contains(strings.ToLower(body), "content-encoding: gzip"))
	}
	// TEST 19 "schema check".
	for cfg, want := range map[string]string{
		`{"comp_level":10}`:        "comp_level: must be an integer from 1 to 9, got 10",
		`{"http_version":2}`:       "http_version: must be 1.1 or 1.0, got 2",
		`{"buffers":{"number":0}}`: "buffers.number: must be an integer > 0, got 0",
		`{"types":[]}`:             "types: must be",
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/global_rules/1", `{"plugins":{"gzip":`+cfg+`}}`)
		if status != 400 || !strings.Contains(resp, "failed to check the configuration of plugin gzip err: "+want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", cfg, status, resp, want)
		}
	}
}

// gzip's buffers (nginx's gzip_buffers) through the real binary: APISIX's doc example
// is accepted and serves, and number × size bounds the body the compressor holds before
// it sends what it has: with {"number": 1, "size": 512} at most 511 of the 3000 bytes a
// slow node sent first stay in the compressor, so the first 2048 reach the client,
// decodable, while the node still holds the rest back; with APISIX's example (8 × 16 KiB)
// they all stay in the compressor.
func TestGzipBuffers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Repeat("<p>hello world</p>\n", 1000)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page[:3000])
		w.(http.Flusher).Flush() // chunked: gw streams it
		if strings.HasSuffix(r.URL.Path, "/slow") {
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
		io.WriteString(w, page[3000:])
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	in := newInstance(t, "")
	in.start("--workers", "1")
	// t/plugin/gzip.t TEST 4 and APISIX's doc: buffers given, once whole and once in part.
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/example/*","plugins":{"gzip":{"comp_level":9,"buffers":{"number":8,"size":16384}}},"upstream":{"nodes":{%q:1}}}`, ln.Addr()))
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/doc/*","plugins":{"gzip":{"buffers":{"number":8}}},"upstream":{"nodes":{%q:1}}}`, ln.Addr()))
	in.mustPut("/apisix/admin/routes/3", fmt.Sprintf(`{"uri":"/small/*","plugins":{"gzip":{"buffers":{"number":1,"size":512}}},"upstream":{"nodes":{%q:1}}}`, ln.Addr()))
	if status, body := in.adminCall("GET", "/apisix/admin/routes/1", ""); status != 200 || !strings.Contains(body, `"buffers":{"number":8,"size":16384}`) {
		t.Fatalf("GET route 1: %d %s", status, body)
	}

	for _, path := range []string{"/example/page", "/doc/page", "/small/page"} {
		resp, body := in.get(path, "Accept-Encoding", "gzip")
		zr, err := gzip.NewReader(strings.NewReader(body))
		if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: Content-Encoding %q, %v", path, resp.Header.Get("Content-Encoding"), err)
		}
		if plain, err := io.ReadAll(zr); err != nil || string(plain) != page {
			t.Fatalf("%s: unzips to %d bytes (%v), want %d", path, len(plain), err, len(page))
		}
	}

	// firstBytes reports whether the first 2048 bytes of /slow decode from what the client
	// gets within wait, while the node holds all but its first 3000 back.
	firstBytes := func(prefix string, wait time.Duration) bool {
		req, _ := http.NewRequest("GET", "http://"+in.data+prefix+"/slow", nil)
		req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client leaves the body as it comes
		resp, err := freshConnections.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got := make(chan bool, 1)
		go func() {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				got <- false
				return
			}
			head := make([]byte, 2048)
			_, err = io.ReadFull(zr, head)
			got <- err == nil && string(head) == page[:2048]
		}()
		select {
		case ok := <-got:
			return ok
		case <-time.After(wait):
			return false
		}
	}
	// Generous: the bytes are on their way at once, and only a stalled machine is slower.
	if !firstBytes("/small", 15*time.Second) {
		t.Error("/small (buffers 1 × 512): the first 2048 bytes did not reach the client while the node held the rest")
	}
	// The contrast: 128 KiB of buffers hold the 3000 bytes back. Waiting longer only makes
	// this surer.
	if firstBytes("/example", time.Second) {
		t.Error("/example (buffers 8 × 16384): the first 2048 bytes came at once; the bound made no difference")
	}
	releaseOnce.Do(func() { close(release) })

	for cfg, want := range map[string]string{
		`{"buffers":{"number":0}}`:   "buffers.number: must be an integer > 0, got 0",
		`{"buffers":{"size":-1}}`:    "buffers.size: must be an integer > 0, got -1",
		`{"buffers":{"number":"8"}}`: `buffers.number: must be an integer > 0, got \"8\"`,
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/4", `{"uri":"/x","plugins":{"gzip":`+cfg+`},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
		if status != 400 || !strings.Contains(resp, "failed to check the configuration of plugin gzip err: "+want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", cfg, status, resp, want)
		}
	}
}
