// Command grpcload is the gRPC benchmark's node and load client (runner -grpc): one binary,
// two roles, so that both speak the same service without generated code.
//
//	grpcload serve -listen 127.0.0.1:50051 [-body 10]
//	grpcload load -target 127.0.0.1:9080 -streams 16 -duration 5s
//
// serve answers the unary call /bench.Echo/Call with a fixed body. load keeps -streams
// unary calls in flight on one HTTP/2 connection (h2c, prior knowledge) for -duration and
// prints one line: calls, failed, calls per second and the p50 and p99 call times.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// rawCodec passes messages as the bytes they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpcload serve|load [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown role %q: serve or load", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcload:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:50051", "address to listen on")
	size := fs.Int("body", 10, "response message size in bytes")
	_ = fs.Parse(args)
	body := []byte(strings.Repeat("x", *size))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "bench.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			return &body, nil
		}}},
	}, nil)
	return srv.Serve(ln)
}

func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	target := fs.String("target", "127.0.0.1:9080", "the gateway's h2c address")
	streams := fs.Int("streams", 16, "calls in flight at once, on one connection")
	duration := fs.Duration("duration", 5*time.Second, "how long to call")
	_ = fs.Parse(args)
	cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return err
	}
	defer cc.Close()
	// One call first: the connection is up before the clock starts.
	req := []byte("0123456789")
	var out []byte
	if err := cc.Invoke(context.Background(), "/bench.Echo/Call", &req, &out); err != nil {
		return fmt.Errorf("first call: %w", err)
	}
	var (
		mu     sync.Mutex
		times  []time.Duration
		failed int
		wg     sync.WaitGroup
	)
	end := time.Now().Add(*duration)
	start := time.Now()
	for range *streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1<<16)
			bad := 0
			in, out := []byte("0123456789"), []byte(nil)
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cc.Invoke(ctx, "/bench.Echo/Call", &in, &out)
				cancel()
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			times = append(times, mine...)
			failed += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(times)
	pct := func(p float64) float64 {
		if len(times) == 0 {
			return 0
		}
		return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
	}
	fmt.Printf("calls %d failed %d rps %.0f p50_ms %.3f p99_ms %.3f\n", len(times), failed, float64(len(times))/elapsed.Seconds(), pct(0.50), pct(0.99))
	return nil
}
