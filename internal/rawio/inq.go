package rawio

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A short read does not mean the socket is empty: the kernel ends a read at the peer's
// FIN, and an error (a reset) waits for the next read too, neither announced again. nginx
// learns of them from EPOLLRDHUP, which Go's poller does not pass on. TCP_INQ does for the
// FIN (Linux 4.18): with it on, recvmsg(2) says in a control message how many bytes the
// read left behind, and 1 when none but the FIN is left. A reset it does not count, so a
// Stream waits before a read only when the last one said 0 and a write succeeded since
// (Stream.waitsFirst).

// inqControl is room for one control message carrying an int32: a cmsghdr and the int,
// aligned (CMSG_SPACE(4)).
const inqControl = unix.SizeofCmsghdr + 8

// receiver holds recvmsg's arguments, kept in the Stream so that a read allocates nothing.
type receiver struct {
	iov     unix.Iovec
	msg     unix.Msghdr
	control [inqControl]byte
}

// enableInq turns TCP_INQ on for fd and reports whether it could (a TCP socket, a kernel
// that has it).
func enableInq(fd uintptr) bool {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_INQ, 1) == nil
}

// read is recvmsg(2) into p, retried on EINTR, as Read is read(2). inq is what the kernel
// says is left to read after it: 0 when nothing is, -1 when it did not say.
func (r *receiver) read(fd uintptr, p []byte) (n, inq int, errno syscall.Errno) {
	r.iov.Base = unsafe.SliceData(p)
	r.iov.SetLen(len(p))
	r.msg.Iov = &r.iov
	r.msg.Iovlen = 1
	for {
		r.msg.Control = &r.control[0]
		r.msg.SetControllen(inqControl)
		got, _, e := syscall.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), 0)
		if e == syscall.EINTR {
			continue
		}
		r.iov.Base = nil // keep no reference to p
		if e != 0 {
			return 0, -1, e
		}
		return int(got), r.inq(), 0
	}
}

// inq reads TCP_CM_INQ's count from the control message recvmsg left, -1 without one.
func (r *receiver) inq() int {
	if r.msg.Controllen < unix.SizeofCmsghdr+4 {
		return -1
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&r.control[0]))
	if h.Level != unix.IPPROTO_TCP || h.Type != unix.TCP_CM_INQ || h.Len < unix.SizeofCmsghdr+4 {
		return -1
	}
	return int(*(*int32)(unsafe.Pointer(&r.control[unix.SizeofCmsghdr])))
}
