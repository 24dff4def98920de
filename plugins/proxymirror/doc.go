// Package proxymirror is APISIX's proxy-mirror plugin (priority 1010): a copy of each
// request proxied on the route, or a sample_ratio of them, goes to another server (host,
// with path), whose answer is read and dropped. The copy is made in the log phase, once
// the request has been proxied, and sent in the background by a fixed set of senders per
// worker (client.go), so that the mirror never delays or changes the client's answer:
// a copy that does not fit the senders' queue or their memory budget is dropped, never
// waited for. A body is mirrored when the request declares one of at most 1 MiB, which
// the access phase reads whole so that it can go both upstream and to the mirror.
package proxymirror
