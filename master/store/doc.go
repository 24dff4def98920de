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
//	<dir>/<kind>/<id>.json    one object: {"kind","id","created_index","modified_index","value"}
//
// Every file is replaced atomically: written to a "tmp-*" file in the same directory,
// fsynced, renamed over the target, then the directory is fsynced. A Put needs no revision
// file write because the object carries its own ModifiedIndex; Delete and NewID write the
// revision file first, so the counter never goes back after a restart. At Open the
// revision is the larger of the revision file and every object's ModifiedIndex, leftover
// "tmp-*" files from a crash are removed, and any file that does not parse fails Open with
// its path: the store is loaded whole or not at all.
//
// Two processes must not write one directory at once; during a binary upgrade the old
// master has to stop taking writes before the new one opens the store.
package store
