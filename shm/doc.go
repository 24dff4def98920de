// Package shm maps shared-memory segments that the master creates and every worker maps
// MAP_SHARED. A segment is an anonymous memfd, so it is private to the instance and freed
// when the last process holding it exits; the master keeps it for its whole life and hands
// it to a new master on upgrade. Each segment starts with a header (magic, layout name and
// version, sizes) checked on every open, so two binaries never read one layout as another.
// Only fixed-size plain data lives inside: 8-byte-aligned words updated with sync/atomic,
// never Go pointers, strings or slices. A process killed at any instruction leaves no lock
// held for good: updates are single-word compare-and-swaps, and the one lock, the keyed
// table's per-bucket lock for giving a slot to a new key, is taken over once it is a
// second old (keyed.go). This package keeps the segments and the primitives tables are
// built from (KeyHash, and KeyedTable, one payload per key, which limit-req, limit-conn
// and api-breaker each lay out in a segment of their own); a table with one user lives in
// that user's package (limit-count's window table, prometheus's metrics table). The
// upstream health table (health.go) stays here: its two users are the master's checker and
// the worker's proxy, and this is the one package below both.
package shm
