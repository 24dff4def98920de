package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HeaderSize is the bytes before a segment's data; a multiple of 64 so data starts on a
// cache line.
const HeaderSize = 64

// magic opens every segment ("gwshm" and a format number for the header itself).
var magic = [8]byte{'g', 'w', 's', 'h', 'm', 0, 0, 1}

// Layout names what a segment holds and the version of that layout. Two binaries agree on
// a segment only if both match exactly.
type Layout struct {
	Name    string // at most 16 bytes, e.g. "limit-count"
	Version uint32
}

// layoutEpoch is added to every layout version. It is "0" in every real build; the upgrade
// tests build a binary with -ldflags "-X gw/shm.layoutEpoch=1" to stand for a release whose
// segment layouts changed, and check that the old master's segments are refused.
var layoutEpoch = "0"

func (l Layout) effectiveVersion() uint32 {
	epoch, _ := strconv.ParseUint(layoutEpoch, 10, 16)
	return l.Version + uint32(epoch)<<16
}

// Header offsets.
const (
	offMagic    = 0  // [8]byte
	offName     = 8  // [16]byte
	offVersion  = 24 // uint32
	offReserved = 28 // uint32
	offSize     = 32 // uint64: bytes of data after the header
)

// ErrLayout means a segment was made by a binary with another layout.
var ErrLayout = errors.New("shm: segment layout mismatch")

// Segment is one mapped segment. Its methods are safe for concurrent use; the data is
// shared with other processes, so every access to it must be atomic.
type Segment struct {
	file   *os.File
	mem    []byte
	layout Layout
}

// Create makes a new memfd segment with dataSize bytes of zeroed data after the header.
func Create(layout Layout, dataSize int) (*Segment, error) {
	if len(layout.Name) == 0 || len(layout.Name) > 16 {
		return nil, fmt.Errorf("shm: layout name %q must be 1-16 bytes", layout.Name)
	}
	if dataSize <= 0 || dataSize%8 != 0 {
		return nil, fmt.Errorf("shm: %s: data size %d must be a positive multiple of 8", layout.Name, dataSize)
	}
	fd, err := unix.MemfdCreate("gw-"+layout.Name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create %s: %w", layout.Name, err)
	}
	file := os.NewFile(uintptr(fd), "gw-shm-"+layout.Name)
	total := HeaderSize + dataSize
	if err := unix.Ftruncate(fd, int64(total)); err != nil {
		file.Close()
		return nil, fmt.Errorf("shm: sizing %s to %d bytes: %w", layout.Name, total, err)
	}
	mem, err := unix.Mmap(fd, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("shm: mapping %s: %w", layout.Name, err)
	}
	copy(mem[offMagic:], magic[:])
	copy(mem[offName:offName+16], layout.Name)
	binary.LittleEndian.PutUint32(mem[offVersion:], layout.effectiveVersion())
	binary.LittleEndian.PutUint64(mem[offSize:], uint64(dataSize))
	return &Segment{file: file, mem: mem, layout: layout}, nil
}

// Open maps a segment another process created (a worker's inherited descriptor, or the
// old master's on upgrade) and checks that its header says layout. The file may be closed
// afterwards: the Segment keeps its own descriptor.
func Open(f *os.File, layout Layout) (*Segment, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: dup %s: %w", f.Name(), err)
	}
	file := os.NewFile(uintptr(fd), f.Name())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		file.Close()
		return nil, fmt.Errorf("shm: stat %s: %w", f.Name(), err)
	}
	if st.Size < HeaderSize {
		file.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, smaller than a header", ErrLayout, f.Name(), st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("shm: mapping %s: %w", f.Name(), err)
	}
	s := &Segment{file: file, mem: mem, layout: layout}
	if err := s.check(layout); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Segment) check(want Layout) error {
	var gotMagic [8]byte
	copy(gotMagic[:], s.mem[offMagic:])
	if gotMagic != magic {
		return fmt.Errorf("%w: not a gw segment (magic %q)", ErrLayout, gotMagic[:])
	}
	name := string(trimZeros(s.mem[offName : offName+16]))
	version := binary.LittleEndian.Uint32(s.mem[offVersion:])
	if name != want.Name || version != want.effectiveVersion() {
		return fmt.Errorf("%w: segment holds %s layout v%d, this binary expects %s layout v%d", ErrLayout, name, version, want.Name, want.effectiveVersion())
	}
	size := binary.LittleEndian.Uint64(s.mem[offSize:])
	if size != uint64(len(s.mem)-HeaderSize) {
		return fmt.Errorf("%w: %s header says %d data bytes, mapping has %d", ErrLayout, name, size, len(s.mem)-HeaderSize)
	}
	return nil
}

func trimZeros(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// Layout returns what the segment holds.
func (s *Segment) Layout() Layout { return s.layout }

// File is the segment's descriptor, to pass to a worker (ExtraFiles) or a new master.
func (s *Segment) File() *os.File { return s.file }

// Data is the segment's data area: shared with other processes, page-aligned plus
// HeaderSize, so every multiple of 8 is 8-byte aligned.
func (s *Segment) Data() []byte { return s.mem[HeaderSize:] }

// Size is the capacity of the data area in bytes.
func (s *Segment) Size() int { return len(s.mem) - HeaderSize }

// Word returns the 64-bit word at byte offset off of the data area, for atomic access.
// off must be a multiple of 8 within Size; anything else is a bug and panics.
func (s *Segment) Word(off int) *atomic.Uint64 {
	if off%8 != 0 || off < 0 || off+8 > s.Size() {
		panic(fmt.Sprintf("BUG: shm: word offset %d outside %s (%d bytes) or unaligned", off, s.layout.Name, s.Size()))
	}
	return (*atomic.Uint64)(unsafe.Pointer(&s.mem[HeaderSize+off]))
}

// Close unmaps the segment and closes its descriptor. Other processes keep their mappings.
func (s *Segment) Close() error {
	var errs []error
	if s.mem != nil {
		errs = append(errs, unix.Munmap(s.mem))
		s.mem = nil
	}
	if s.file != nil {
		errs = append(errs, s.file.Close())
		s.file = nil
	}
	return errors.Join(errs...)
}
