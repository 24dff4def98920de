package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// loader is a load client that never retries, as wrk does not: every failure counts. It
// honours Connection: close by opening a new connection for the next request, as an
// HTTP/1.1 client must.
type loader struct {
	ok, failed, dialFailed atomic.Int64

	mu     sync.Mutex
	errors []string
	stop   chan struct{}
	wg     sync.WaitGroup
}

// startLoad runs clients goroutines against address until stop is called.
func startLoad(address, path string, clients int, keepAlive bool) *loader {
	l := &loader{stop: make(chan struct{})}
	request := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: gw.test\r\n", path)
	if !keepAlive {
		request += "Connection: close\r\n"
	}
	request += "\r\n"
	for i := 0; i < clients; i++ {
		l.wg.Add(1)
		go l.client(address, request)
	}
	return l
}

func (l *loader) client(address, request string) {
	defer l.wg.Done()
	var conn net.Conn
	var reader *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		if conn == nil {
			c, err := net.DialTimeout("tcp", address, 5*time.Second)
			if err != nil {
				l.dialFailed.Add(1)
				l.fail("dial: " + err.Error())
				time.Sleep(10 * time.Millisecond)
				continue
			}
			conn, reader = c, bufio.NewReader(c)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, request); err != nil {
			l.fail("write: " + err.Error())
			conn.Close()
			conn = nil
			continue
		}
		resp, err := http.ReadResponse(reader, nil)
		if err != nil {
			l.fail("read: " + err.Error())
			conn.Close()
			conn = nil
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			l.fail("body: " + err.Error())
		case resp.StatusCode != 200:
			l.fail(fmt.Sprintf("status %d", resp.StatusCode))
		default:
			l.ok.Add(1)
		}
		if err != nil || resp.Close {
			conn.Close()
			conn = nil
		}
	}
}

func (l *loader) fail(msg string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errors) < 10 {
		l.errors = append(l.errors, msg)
	}
	l.mu.Unlock()
}

// finish stops the clients and returns a summary.
func (l *loader) finish() string {
	close(l.stop)
	l.wg.Wait()
	return fmt.Sprintf("ok %d, failed %d (dial %d), first errors %q", l.ok.Load(), l.failed.Load(), l.dialFailed.Load(), l.errors)
}
