package master

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestBodyFirstWriterLetsTheWorkerFinishWriting plays the worker's part on the private
// socket: write the whole request, and only then read the answer. A handler that refuses
// a large body without reading it must still be heard.
func TestBodyFirstWriterLetsTheWorkerFinishWriting(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = &bodyFirstWriter{ResponseWriter: w, body: r.Body}
		http.Error(w, "too large", http.StatusRequestEntityTooLarge) // reads nothing
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for _, size := range []int{0, 100, 4 << 20} {
		t.Run(fmt.Sprint(size, " bytes"), func(t *testing.T) {
			conn, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			request := fmt.Sprintf("PUT /apisix/admin/routes/1 HTTP/1.1\r\nHost: gw-master\r\nContent-Length: %d\r\n\r\n%s",
				size, strings.Repeat("x", size))
			if _, err := conn.Write([]byte(request)); err != nil {
				t.Fatalf("writing the request: %v", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Close {
				t.Errorf("answer: %d, Connection: close %v; want 413 on a connection kept open", resp.StatusCode, resp.Close)
			}
		})
	}
}
