// Package encoding holds what the compressing plugins (gzip, brotli) share: the fields
// of their configurations that are alike (Common), the decisions they make alike
// (Compressor: which media types, lengths and request versions a route compresses,
// whether a client takes a content coding, the weak ETag of a compressed body), and the
// compression itself, of a body held whole or of one streaming from the node (stream),
// with whichever library's writer the plugin gives. It is no plugin: it registers
// nothing.
package encoding
