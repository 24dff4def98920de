package bytesconv

import (
	"strings"
	"testing"
	"unsafe"
)

// Longer than 32 bytes, so that a plain conversion would allocate.
var long = strings.Repeat("route-", 8)

func TestViewsShareMemory(t *testing.T) {
	b := Bytes(long)
	if string(b) != long || unsafe.SliceData(b) != unsafe.StringData(long) {
		t.Fatalf("Bytes(%q) = %q, not a view of the string", long, b)
	}
	s := String(b)
	if s != long || unsafe.StringData(s) != unsafe.SliceData(b) {
		t.Fatalf("String(%q) = %q, not a view of the bytes", b, s)
	}
	if len(Bytes("")) != 0 || String(nil) != "" {
		t.Fatal("the views of empty values are not empty")
	}
}

var sink int

func TestViewsDoNotAllocate(t *testing.T) {
	buf := []byte(long)
	allocs := testing.AllocsPerRun(100, func() {
		sink += len(Bytes(long)) + len(String(buf))
	})
	if allocs != 0 {
		t.Fatalf("the views allocated %v times a run", allocs)
	}
}
