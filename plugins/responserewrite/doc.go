// Package responserewrite is APISIX's response-rewrite: once a route's response is final,
// whoever made it, it changes the status, the header fields (add, set, remove, values
// with variables) and the body (replaced whole, or rewritten by regex filters). Headers
// and status change in place and leave a streamed body streaming; only a filter reads
// the node's body whole (up to max_resp_body_size), and a replaced body drops it unread.
// Everything that can be is compiled at build: header values into templates, the body
// out of its base64, the filters' regexes and their replacement templates.
package responserewrite
