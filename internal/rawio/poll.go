package rawio

import (
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Waiting before reading.
//
// A keep-alive connection's next request cannot be in the socket when the response to the
// last one has just been written: a client that does not pipeline sends it only after it
// read that response. Reading anyway costs a read(2) that fails with EAGAIN, then the wait
// on the poller, then the read that gets the request: one system call in five per proxied
// request. nginx skips that read because it keeps each socket's readiness itself.
//
// Go's poller keeps readiness too, but net.Conn's Read clears it before the first read
// (pollReset), which is only safe because that read follows. Waiting on the poller without
// clearing it first (runtime_pollWait, as internal/poll does) is safe when the last read
// left the socket empty: any byte that arrived after that read also set the readiness, so
// the wait returns at once for it, and no byte that arrived before it is left unread. A
// readiness left over from bytes that read already took only costs that EAGAIN read after
// all. Whether a read left the socket empty is TCP_INQ's to say (inq.go): a short read
// may have stopped at the peer's FIN.
//
// Reaching the runtime's poll descriptor needs two things Go does not export: the
// function, linked by name as internal/poll links it, and the descriptor's address, read
// from net's unexported fields at offsets found by reflection once. Should either change
// in a Go release, pollDescOf finds nothing and every read reads first, as before.

//go:linkname runtimePollWait internal/poll.runtime_pollWait
func runtimePollWait(ctx uintptr, mode int) int

// The runtime's answers to runtimePollWait (runtime/netpoll.go).
const (
	pollNoError    = 0
	pollErrClosing = 1
	pollErrTimeout = 2
)

// pollPath is where a syscall.RawConn from package net keeps its poll descriptor: its
// fd (*netFD) field, then the offset of runtimeCtx within the netFD, and of Sysfd to check
// that the offsets read what they should.
type pollPath struct {
	conn       reflect.Type // *net.rawConn
	fdField    uintptr
	runtimeCtx uintptr
	sysfd      uintptr
}

var (
	pollPathOnce sync.Once
	pollPathOf   pollPath
	// pathChecked is pathUnchecked until a descriptor read through the path was compared
	// with the one raw.Control gives.
	pathChecked atomic.Int32
)

const (
	pathUnchecked int32 = iota
	pathRight
	pathWrong
)

// findPollPath walks net.rawConn{fd *netFD{pfd poll.FD{Sysfd int; pd pollDesc{runtimeCtx
// uintptr}}}} by name and kind; anything else found leaves the path empty.
func findPollPath(raw syscall.RawConn) (p pollPath) {
	t := reflect.TypeOf(raw)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return
	}
	fd, ok := t.Elem().FieldByName("fd")
	if !ok || fd.Type.Kind() != reflect.Pointer || fd.Type.Elem().Kind() != reflect.Struct {
		return
	}
	pfd, ok := fd.Type.Elem().FieldByName("pfd")
	if !ok || pfd.Type.Kind() != reflect.Struct {
		return
	}
	sysfd, ok := pfd.Type.FieldByName("Sysfd")
	if !ok || sysfd.Type.Kind() != reflect.Int {
		return
	}
	pd, ok := pfd.Type.FieldByName("pd")
	if !ok || pd.Type.Kind() != reflect.Struct {
		return
	}
	ctx, ok := pd.Type.FieldByName("runtimeCtx")
	if !ok || ctx.Type.Kind() != reflect.Uintptr {
		return
	}
	return pollPath{
		conn:       t,
		fdField:    fd.Offset,
		runtimeCtx: pfd.Offset + pd.Offset + ctx.Offset,
		sysfd:      pfd.Offset + sysfd.Offset,
	}
}

// pollDescOf returns the runtime's poll descriptor behind raw, or 0 when it cannot be
// found (see above). Until one check passed, it also compares the descriptor number read
// through the offsets with raw.Control's. Safe for concurrent use.
func pollDescOf(raw syscall.RawConn) uintptr {
	if r, ok := raw.(socketRaw); ok {
		// A Socket's own (socket.go), registered now if it was not yet: whoever asks is
		// about to wait on it.
		if !r.s.acquire() {
			return 0
		}
		pd, _ := r.s.register()
		r.s.release()
		return pd
	}
	pollPathOnce.Do(func() { pollPathOf = findPollPath(raw) })
	p := &pollPathOf
	if p.conn == nil || reflect.TypeOf(raw) != p.conn {
		return 0
	}
	netFD := *(*unsafe.Pointer)(unsafe.Add(reflect.ValueOf(raw).UnsafePointer(), p.fdField))
	if netFD == nil {
		return 0
	}
	switch pathChecked.Load() {
	case pathWrong:
		return 0
	case pathUnchecked:
		var fd uintptr
		if raw.Control(func(s uintptr) { fd = s }) != nil {
			return 0 // closed already: check with the next one
		}
		if uintptr(*(*int)(unsafe.Add(netFD, p.sysfd))) != fd {
			pathChecked.Store(pathWrong)
			return 0
		}
		pathChecked.Store(pathRight)
	}
	return *(*uintptr)(unsafe.Add(netFD, p.runtimeCtx))
}
