package worker

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestGRPCTimeoutParses(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1S": time.Second, "250m": 250 * time.Millisecond, "2H": 2 * time.Hour, "3M": 3 * time.Minute,
		"99999999u": 99999999 * time.Microsecond, "5n": 5,
	} {
		if got, ok := grpcTimeout([]byte(v)); !ok || got != want {
			t.Errorf("grpc-timeout %q: %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "S", "1", "1s", "123456789S", "-1S", "1.5S"} {
		if got, ok := grpcTimeout([]byte(v)); ok {
			t.Errorf("grpc-timeout %q parsed as %v, want refused", v, got)
		}
	}
}

func TestGRPCMessageEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"plain text": "plain text", "100%": "100%25", "é": "%C3%A9", "a\nb": "a%0Ab",
	} {
		if got := grpcEncodeMessage(in); got != want {
			t.Errorf("grpcEncodeMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// The mapping gRPC's clients apply to an HTTP status (grpc/grpc's
// doc/http-grpc-status-mapping.md).
func TestGRPCCodeOfHTTP(t *testing.T) {
	for status, want := range map[int]int{
		400: grpcInternal, 401: grpcUnauthenticated, 403: grpcPermissionDenied, 404: grpcUnimplemented,
		429: grpcUnavailable, 502: grpcUnavailable, 503: grpcUnavailable, 504: grpcUnavailable, 500: grpcUnknown, 418: grpcUnknown,
	} {
		if got := grpcCodeOfHTTP(status); got != want {
			t.Errorf("HTTP %d: code %d, want %d", status, got, want)
		}
	}
}

func TestIsGRPCRequest(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc;charset=utf-8": true,
		"Application/GRPC": true, "application/grpc-web": false, "application/json": false, "": false,
	} {
		var h fasthttp.RequestHeader
		if ct != "" {
			h.SetContentType(ct)
		}
		if got := isGRPCRequest(&h); got != want {
			t.Errorf("content-type %q: %v, want %v", ct, got, want)
		}
	}
}
