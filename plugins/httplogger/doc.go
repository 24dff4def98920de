// Package httplogger is APISIX's http-logger: each request's log entry (logentry's
// default JSON, or a log_format from the route or the plugin's plugin_metadata) is added
// to the route's batch processor (plugins/batch) in the log phase, and the processor's
// goroutine POSTs batches to uri, a JSON array (or one object for a batch of one) or
// entries a line each (concat_method new_line). The request never waits on the
// collector: a slow or dead one costs buffered memory, bounded per worker, and what does
// not fit is dropped and counted.
package httplogger
