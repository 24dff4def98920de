// Package brotli is APISIX's brotli plugin: it compresses a route's response bodies with
// Brotli (github.com/andybalholm/brotli, pure Go) when the client accepts br, deciding
// as APISIX's plugin does. It runs before gzip (996 against 995), whose check for a
// Content-Encoding then leaves a body brotli compressed alone, so a route with both
// answers br to the clients that take it and gzip to the others.
package brotli
