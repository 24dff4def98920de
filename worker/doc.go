// Package worker is one worker process: it inherits its slot's listening sockets and an IPC
// socket from the master, compiles each config snapshot the master sends into an immutable
// route table (router, upstreams, plugin chains) swapped in with one atomic store,
// acknowledges it, and serves requests with fasthttp, HTTP/2 streams included (http2.go maps
// each onto a fasthttp.RequestCtx for the same handler; a gRPC route's call then streams
// both ways over the stream, grpc.go). A request reads the route table once
// and never locks. A request whose body streams from a node runs its log phase and writes
// its access log line once the server has sent the body, when what went out is known
// (proxy.OnStreamEnd). The worker lives only as long as its master's end of the IPC
// socket: EOF there means the master is gone.
package worker
