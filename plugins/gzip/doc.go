// Package gzip is APISIX's gzip plugin: it compresses a route's response bodies with gzip
// when the client accepts it, as nginx's gzip filter does behind APISIX's. What may be
// compressed is decided from the response as it stands (its status, Content-Type,
// Content-Length, Content-Encoding) and the request (Accept-Encoding, HTTP version);
// compression reuses pooled writers, one pool per level.
package gzip
