// Package accesslog writes a worker's access log: one line per finished request, in
// nginx's combined format or as one JSON object, to a file that every worker process opens
// with O_APPEND. Under the Logger's mutex, Log formats the line in the Logger's one
// scratch buffer (the time string is formatted once a second and shared) and copies it
// into a buffer of conf.AccessLog.Buffer bytes. A line that would overflow the buffer
// first writes the buffer out, and a background goroutine writes it every FlushInterval,
// so a line waits at most that long; with Buffer 0 each line is written on its own. Every
// write(2) carries only whole lines, which is what keeps several processes appending to
// one file from interleaving inside a line (short writes, which regular files only see
// when the disk is full, are the exception). Reopen, for USR1 and logrotate, flushes into
// the old file before switching to the newly opened one. The file is an os.File, not a raw
// descriptor: a disk that stalls a write must not stall the worker's processor with it
// (openFile says why). Log does not allocate (the time strings cost one allocation a
// second); write errors drop the buffered lines and are returned by the next Flush, Reopen
// or Close.
//
// Bytes sent are nginx's $body_bytes_sent: 0 for HEAD, 1xx, 204 and 304; for a body
// streamed from a node, what the worker says went to the client (Entry.StreamedBody),
// which it logs once the server has sent it; otherwise the body's length (for a stream
// nobody counted, its Content-Length, 0 when chunked).
package accesslog
