// Package ipc carries framed, versioned messages between the master and one worker over a
// Unix-domain socketpair. A frame is an 8-byte header (magic "gw", protocol version, kind,
// payload length) followed by the payload, which is opaque to this package: the master and
// the worker agree on its JSON shape per kind. A Conn may be written from many goroutines
// (writes are serialised) but read from one. Either side sees io.EOF when the other
// process is gone, however it died; workers rely on that to never outlive their master.
package ipc
