package httplogger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
)

// emptyOK is rawCollector's answer, made once: writing it as a string allocated a copy
// per POST, which BenchmarkSend counted as the sender's.
var emptyOK = []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

// rawCollector answers every POST with an empty 200 and reads as little else as it can,
// so that a benchmark's time is the sender's.
func rawCollector(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReaderSize(conn, 64<<10)
				for {
					length := -1
					for {
						line, err := r.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
						if name, value, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(string(name), "Content-Length") {
							length, _ = strconv.Atoi(string(bytes.TrimSpace(value)))
						}
					}
					if _, err := r.Discard(length); err != nil {
						return
					}
					if _, err := conn.Write(emptyOK); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkSend is one POST of a default batch, joined as the processor joins it: 1000
// entries of some 700 bytes, as the benchmark route's, to a collector that answers at
// once.
func BenchmarkSend(b *testing.B) {
	cfg, err := Parse(json.RawMessage(`{"uri":"http://` + rawCollector(b) + `/log"}`))
	if err != nil {
		b.Fatal(err)
	}
	s := newSender(cfg)
	entry := `{"request":{"url":"http://127.0.0.1:9080/logged","uri":"/logged"` + strings.Repeat(",\"x\":1", 90) + `}}`
	body := []byte("[" + strings.Repeat(entry+",", 999) + entry + "]")
	b.ReportAllocs()
	for b.Loop() {
		if err := s.send(body); err != nil {
			b.Fatal(err)
		}
	}
}
