// Package h2write is what both sides of gw's HTTP/2 write the same way: towards clients
// (worker/http2.go, worker/grpc.go) and towards gRPC nodes (worker/proxy/grpcconn.go).
//
//   - Flusher: one write for the frames several streams buffered together.
//   - HeaderBlock: a header block encoded with HPACK and written as HEADERS and
//     CONTINUATION frames.
//
// Everything here runs under the connection's lock; nothing allocates per stream.
package h2write
