// Package limitconn is APISIX's limit-conn plugin: at most conn requests in flight per
// key, burst more delayed, the rest rejected, counted exactly across workers in shared
// memory (shm.KeyedTable). A request's place is taken in the access phase and given back
// in the log phase, which the worker runs however the request ends (a response, a
// streamed body's end, a client gone); what a killed worker held, its ledger in the same
// table tells the master, which gives it back before the worker is reaped (ledger.go).
package limitconn
