package h2write

import (
	"bytes"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/internal/bytesconv"
)

// HeaderBlock encodes one header block at a time with HPACK and writes it as HEADERS and
// CONTINUATION frames. The zero value is not usable: call Init.
//
// There is no dynamic table: the encoder is given names and values that live in pooled
// buffers (bytesconv.String), which a table entry would outlive. The static table still
// covers :status, :method and the common names.
type HeaderBlock struct {
	buf bytes.Buffer
	enc *hpack.Encoder
	// lower holds a header name lowercased for the encoder, which copies it at once.
	lower [256]byte
}

// Init makes the encoder; once per connection.
func (b *HeaderBlock) Init() {
	b.enc = hpack.NewEncoder(&b.buf)
	b.enc.SetMaxDynamicTableSize(0)
}

// Reset starts the next block.
func (b *HeaderBlock) Reset() { b.buf.Reset() }

// Pseudo encodes a pseudo-header (":status", ":path", ...), whose name is lowercase already.
func (b *HeaderBlock) Pseudo(name string, v []byte) {
	_ = b.enc.WriteField(hpack.HeaderField{Name: name, Value: bytesconv.String(v)})
}

// Field encodes one header, its name lowercased (RFC 9113 8.2.1). A name longer than 256
// bytes is left out: no HTTP/1.1 server gw proxies to sends one, and HTTP/2 peers refuse
// far less. The encoder copies both at once and keeps neither.
func (b *HeaderBlock) Field(k, v []byte) {
	if len(k) > len(b.lower) {
		return
	}
	name := b.lower[:len(k)]
	for i, c := range k {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		name[i] = c
	}
	_ = b.enc.WriteField(hpack.HeaderField{Name: bytesconv.String(name), Value: bytesconv.String(v)})
}

// WriteFrames writes the block as a HEADERS frame and as many CONTINUATION frames as the
// peer's largest frame (maxFrame, from its SETTINGS) makes it need.
func (b *HeaderBlock) WriteFrames(fr *http2.Framer, id uint32, endStream bool, maxFrame uint32) error {
	block := b.buf.Bytes()
	limit := int(maxFrame)
	first := block[:min(len(block), limit)]
	block = block[len(first):]
	err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		next := block[:min(len(block), limit)]
		block = block[len(next):]
		err = fr.WriteContinuation(id, len(block) == 0, next)
	}
	return err
}
