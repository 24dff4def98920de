// Package encoding holds what the compressing plugins (gzip, brotli) decide alike: which
// media types a route compresses, whether a client accepts a content coding, and the
// weak ETag of a compressed body. It is no plugin: it registers nothing.
package encoding
