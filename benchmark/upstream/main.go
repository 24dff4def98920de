// Command upstream is the benchmark's origin server: every request, whatever its method
// or path, gets 200 and the same fixed body, on a kept-alive connection. It does as
// little as it can, so that the load core spends its time in wrk, not here.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:1980", "address to listen on")
	size := flag.Int("body", 10, "body size in bytes; 10 is APISIX's benchmark body, 1234567890")
	flag.Parse()
	if *size < 0 || *size > 64<<20 {
		fmt.Fprintf(os.Stderr, "upstream: -body %d: want 0 to %d bytes\n", *size, 64<<20)
		os.Exit(2)
	}
	body := makeBody(*size)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetContentTypeBytes(textPlain)
			ctx.Response.SetBodyRaw(body)
		},
		Name:                          "upstream",
		NoDefaultDate:                 true,
		DisableHeaderNamesNormalizing: true,
	}
	if err := srv.ListenAndServe(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "upstream: %v\n", err)
		os.Exit(1)
	}
}

var textPlain = []byte("text/plain")

// makeBody repeats APISIX's 1234567890 to n bytes.
func makeBody(n int) []byte {
	return bytes.Repeat([]byte("1234567890"), n/10+1)[:n]
}
