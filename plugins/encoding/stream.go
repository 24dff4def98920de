package encoding

import (
	"bytes"
	"io"
	"sync"

	"gw/plugins"
)

// streamReadSize is how much of the node's body a compressing stream reads at a time.
const streamReadSize = 16 << 10

// stream compresses a body as it streams from the node, as nginx's gzip filter does: it
// reads the node's body a piece at a time and hands out what the compressor has produced,
// so a large or endless body is never held whole. Like nginx's, it hands out compressed
// bytes as the compressor emits them (in blocks of tens of KiB), not at every piece the
// node sends. It is the server's to close (CloseWithError), which closes the node's stream
// and puts the compressor back in its pool. With flushAfter set, the compressor is made
// to emit what it holds once it has taken in that much of the body since it last did, so
// a slow node's body reaches the client in pieces no larger than that (or than the
// node's own pieces).
type stream struct {
	src     plugins.StreamDetacher
	w       Writer
	writers *sync.Pool
	// flushAfter is the Compressor's; held counts the body's bytes the compressor took in
	// since it was last flushed.
	flushAfter, held int
	// out holds compressed bytes not handed out yet; in is the node's piece being read.
	out bytes.Buffer
	in  []byte
	// err is the node's io.EOF or error, handed out once out is empty.
	err error
}

var streamPool = sync.Pool{New: func() any { return &stream{in: make([]byte, streamReadSize)} }}

// newStream starts compressing src with a writer of writers (the route's level).
func newStream(src plugins.StreamDetacher, writers *sync.Pool, flushAfter int) *stream {
	s := streamPool.Get().(*stream)
	s.src, s.writers, s.flushAfter, s.held = src, writers, flushAfter, 0
	s.w = writers.Get().(Writer)
	s.w.Reset(&s.out)
	return s
}

func (s *stream) Read(p []byte) (int, error) {
	for s.out.Len() == 0 && s.err == nil {
		n, err := s.src.Read(s.in)
		if n > 0 {
			_, _ = s.w.Write(s.in[:n]) // into a bytes.Buffer: it does not fail
			if s.held += n; s.flushAfter > 0 && s.held >= s.flushAfter && err == nil {
				_ = s.w.Flush()
				s.held = 0
			}
		}
		switch {
		case err == io.EOF:
			_ = s.w.Close() // the last block and the coding's end (gzip's trailer)
			s.err = io.EOF
		case err != nil:
			// The node broke the body off: the client gets what was compressed so far
			// and then the broken stream, never the coding's end that would pass it off
			// as whole.
			s.err = err
		}
	}
	if s.out.Len() > 0 {
		return s.out.Read(p)
	}
	return 0, s.err
}

// CloseWithError closes the node's stream with the server's error (nil once the body was
// sent whole) and returns s and its compressor to their pools; s must not be used after.
func (s *stream) CloseWithError(writeErr error) error {
	err := s.src.CloseWithError(writeErr)
	s.w.Reset(io.Discard)
	s.writers.Put(s.w)
	s.src, s.w, s.writers, s.err = nil, nil, nil, nil
	s.out.Reset()
	streamPool.Put(s)
	return err
}
