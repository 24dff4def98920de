// Package health runs the active half of upstream health checks, in the master, once for
// the whole instance. Given each config snapshot, a Checker lists the upstreams whose
// "checks" are set (stored ones as /apisix/upstreams/<id>, inline ones under their
// route's or service's key), installs one entry per (upstream, node address) in the
// shared health table (shm/health.go) before the workers get that snapshot, and runs one
// prober per upstream: every healthy.interval it probes the nodes that are healthy and
// every unhealthy.interval those that are not, at most active.concurrency at a time, by
// HTTP(S) request or TCP connect, and counts each answer into the table. Workers read the
// same table when they pick a node and count their live traffic into it (passive checks),
// so a node's state is one word every process agrees on. A prober whose upstream did not
// change keeps running across snapshots; a changed one is stopped and started afresh, and
// entries of nodes no longer checked are given up. Probers never touch a worker: the
// table is the only thing they share.
package health
