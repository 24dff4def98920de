// Package store holds the master's Admin API objects (routes, upstreams, services,
// consumers) and makes every change durable before it is acknowledged.
//
// The model: one revision counter orders every change, as etcd's does for APISIX. Each Put
// or Delete takes the next revision; an object remembers the revision that created it
// (CreatedIndex) and the one that last changed it (ModifiedIndex). hashicorp/go-memdb is the
// in-memory index, one table per kind plus a one-row table for the revision, so a read
// transaction sees objects and revision at one consistent point while a writer works. Writes
// are serialised by a mutex; reads never take it.
//
// Persistence sits behind Backend so that an etcd backend can replace the local files
// without touching the index. The file backend Open uses lays a directory out as
//
//	<dir>/revision            the revision counter, decimal, one line
//	<dir>/<kind>/<id>.json    one object: {"kind","id","created_index","modified_index","value","checksum"}
//
// Every file is replaced atomically: written to a "tmp-*" file in the same directory,
// fsynced, renamed over the target, then the directory is fsynced. A Put needs no revision
// file write because the object carries its own ModifiedIndex; Delete and NewID write the
// revision file first, and the backend refuses to write it lower than it was, so the
// counter never goes back after a restart. At Open the revision is the larger of the
// revision file and every object's ModifiedIndex, and leftover "tmp-*" files from a crash
// are removed.
//
// A crash cannot tear a file that is renamed into place, so a damaged file means a
// misbehaving disk or a hand edit. Parsing catches a truncated file; the CRC-32C checksum
// of the value catches a changed byte that still parses. Open checks every file, and if
// any is damaged it loads nothing and returns a CorruptError naming each file and why,
// with what to do: the store is loaded whole or not at all. ReadDir reads a directory the
// same way without changing it (offline export). PutAll stores many objects as one change
// (import).
//
// Two processes must not write one directory at once; during a binary upgrade the old
// master has to stop taking writes before the new one opens the store.
package store
