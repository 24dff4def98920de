// Package batch is APISIX's batch processor, shared by every logger (http-logger,
// tcp-logger, udp-logger, file-logger, syslog): entries a route's log phase adds leave
// the request at once, into a bounded buffer, and a goroutine of the processor's own
// sends them in batches of batch_max_size, after inactive_timeout without a new entry,
// or once the oldest has waited buffer_duration, retrying a failed batch
// max_retry_count times retry_delay apart and then dropping it. A slow or dead collector
// never blocks or delays a request: Add copies the entry and returns, and what no
// buffer can hold is dropped, counted in shared memory (Counters, the loggers'
// gw_<plugin>_dropped_entries_total) and logged at most once a second.
//
// The buffer is bounded per worker, across every processor of the worker (MaxPending
// bytes): a collector that is down costs the worker that memory at most. A processor's
// goroutine runs while the processor has entries and ends once it has sent them all, so
// a processor that a new config snapshot no longer uses is simply collected: nothing
// needs closing. Entries still buffered when a worker exits are lost, as in APISIX.
//
// A batch reaches its sender as a list of entries (New), or, for a sender that joins
// them into one body (http-logger's JSON array or lines), as that body already joined
// in the processor's buffer (NewJoined): a byte is kept before each entry for the
// separator, so no batch is copied again to be sent.
package batch
