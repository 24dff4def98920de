// Package filelogger is APISIX's file-logger: each request's entry (logentry's default
// JSON, or a log_format from the route or the plugin_metadata) is appended to path, a
// line each. The request never writes the file: entries go through the route's batch
// processor (plugins/batch), a batch at least every second, and each batch opens path
// for appending, so a rotated file (logrotate, then gwctl reopen) is followed from the
// next batch on without a signal of its own.
package filelogger
