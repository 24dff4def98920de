package h2write

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/internal/race"
)

// A block larger than the peer's largest frame goes out as HEADERS and CONTINUATION frames
// the peer's own decoder puts back together, names lowercased, END_STREAM on HEADERS only,
// END_HEADERS on the last frame only.
func TestHeaderBlockSplitsAtThePeersLargestFrame(t *testing.T) {
	var b HeaderBlock
	b.Init()
	b.Reset()
	b.Pseudo(":status", []byte("200"))
	long := strings.Repeat("v", 100)
	for i := 0; i < 5; i++ {
		b.Field([]byte("X-Long-"+string(rune('A'+i))), []byte(long))
	}
	b.Field([]byte(strings.Repeat("n", 257)), []byte("left out"))

	var wire bytes.Buffer
	fr := http2.NewFramer(&wire, &wire)
	const maxFrame = 128
	if err := b.WriteFrames(fr, 3, true, maxFrame); err != nil {
		t.Fatal(err)
	}

	var got []string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f.Name+": "+f.Value) })
	frames := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		frames++
		var fragment []byte
		var endHeaders bool
		switch f := f.(type) {
		case *http2.HeadersFrame:
			if frames != 1 || !f.StreamEnded() || f.StreamID != 3 {
				t.Fatalf("frame %d: HEADERS (end stream %v, stream %d), want it first, ending stream 3", frames, f.StreamEnded(), f.StreamID)
			}
			fragment, endHeaders = f.HeaderBlockFragment(), f.HeadersEnded()
		case *http2.ContinuationFrame:
			fragment, endHeaders = f.HeaderBlockFragment(), f.HeadersEnded()
		default:
			t.Fatalf("frame %d is %T", frames, f)
		}
		if len(fragment) > maxFrame {
			t.Fatalf("frame %d carries %d bytes, over the peer's %d", frames, len(fragment), maxFrame)
		}
		if _, err := dec.Write(fragment); err != nil {
			t.Fatal(err)
		}
		if endHeaders {
			break
		}
	}
	if frames < 4 {
		t.Fatalf("%d frames for about 550 bytes at %d a frame", frames, maxFrame)
	}
	want := []string{":status: 200"}
	for i := 0; i < 5; i++ {
		want = append(want, "x-long-"+string(rune('a'+i))+": "+long)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("decoded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Encoding and writing a block allocates nothing once the buffers have grown.
func TestHeaderBlockAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	var b HeaderBlock
	b.Init()
	var wire bytes.Buffer
	fr := http2.NewFramer(&wire, &wire)
	status, name, value := []byte("200"), []byte("Content-Type"), []byte("text/plain")
	allocs := testing.AllocsPerRun(100, func() {
		wire.Reset()
		b.Reset()
		b.Pseudo(":status", status)
		b.Field(name, value)
		_ = b.WriteFrames(fr, 1, false, 16384)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per block, want 0", allocs)
	}
}
