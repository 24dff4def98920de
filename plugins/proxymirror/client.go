package proxymirror

import (
	"bytes"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gw/plugins"
)

// The bounds of mirroring in one worker. A slow or silent mirror holds at most senders
// connections and budget bytes of copies; what does not fit is dropped, never waited for.
const (
	// maxBody is the largest request body mirrored; a request with a larger one, or one
	// of unknown length (chunked), is not mirrored.
	maxBody = 1 << 20
	// budget bounds the bytes of the copies queued or being sent, bodies and headers.
	budget = 16 << 20
	// senders is how many copies one route's mirror is sent at once; queueLen how many
	// more may wait for them.
	senders  = 8
	queueLen = 1024
	// timeout bounds each copy's exchange with the mirror, APISIX's proxy_mirror_timeouts
	// (60s for connect, send and read).
	timeout = 60 * time.Second
	// maxAnswer bounds what is read of the mirror's answer before it is dropped.
	maxAnswer = 64 << 10
)

// client sends one route's copies to its mirror. Safe for concurrent use.
type client struct {
	hc *fasthttp.HostClient
	// path and prefix are path and path_concat_mode "prefix".
	path   []byte
	prefix bool
	// queue holds the copies waiting for one of the running senders, made on the first
	// copy (queueOf): a global rule's instance is built for every route, and only the
	// routes that mirror pay for a queue.
	queue   atomic.Pointer[chan *copyOf]
	running atomic.Int32
}

// newClient is the client of one route's mirror, its connections pooled and kept alive.
// An https mirror's certificate is verified against the system roots, as gw verifies
// https upstreams.
func newClient(c *Config) *client {
	hc := &fasthttp.HostClient{
		Addr:                          c.Addr,
		IsTLS:                         c.TLS,
		MaxConns:                      senders,
		ReadTimeout:                   timeout,
		WriteTimeout:                  timeout,
		MaxConnWaitTimeout:            timeout,
		MaxResponseBodySize:           maxAnswer,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
	}
	if c.TLS {
		hc.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &client{hc: hc, path: []byte(c.Path), prefix: c.PathConcatMode == "prefix"}
}

// send copies c's request, with body, and hands the copy to the senders, within cost
// bytes of the budget the caller reserved; false when it was dropped (the queue is full),
// its budget given back.
func (cl *client) send(c *plugins.Ctx, body []byte, cost int64) bool {
	x := copies.Get().(*copyOf)
	x.cost = cost
	cl.fill(&x.req, c, body)
	return cl.enqueue(x)
}

// Header fields a proxy does not pass on, or that the copy sets itself.
var (
	skipped = [][]byte{[]byte("Host"), []byte("Content-Length"), []byte("Connection"), []byte("Transfer-Encoding"),
		[]byte("Keep-Alive"), []byte("Proxy-Connection"), []byte("Te"), []byte("Trailer"), []byte("Upgrade")}
	questionMark = []byte("?")
)

// targetPool holds the buffers the copy's request target is written in.
var targetPool = sync.Pool{New: func() any { return new([]byte) }}

// fill writes the copy: the method, the target (the client's, or path in its place or
// before it), the Host and header fields as they stand, and the body.
func (cl *client) fill(req *fasthttp.Request, c *plugins.Ctx, body []byte) {
	req.Header.SetMethodBytes(c.Method())
	buf := targetPool.Get().(*[]byte)
	target := (*buf)[:0]
	switch {
	case len(cl.path) == 0:
		target = append(target, c.RequestURI()...)
	case cl.prefix:
		target = append(append(target, cl.path...), c.RequestURI()...)
	default:
		target = append(target, cl.path...)
		if q := c.QueryString(); len(q) > 0 {
			target = append(append(target, questionMark...), q...)
		}
	}
	req.SetRequestURIBytes(target)
	*buf = target
	targetPool.Put(buf)
	req.Header.SetHostBytes(c.Host())
	for name, value := range c.RequestHeaders() {
		if !isSkipped(name) {
			req.Header.AddBytesKV(name, value)
		}
	}
	if body != nil {
		req.SetBody(body)
	}
}

func isSkipped(name []byte) bool {
	for _, s := range skipped {
		if bytes.EqualFold(name, s) {
			return true
		}
	}
	return false
}

// copyOf is one request's copy on its way to the mirror.
type copyOf struct {
	req  fasthttp.Request
	resp fasthttp.Response
	cost int64
}

var (
	copies = sync.Pool{New: func() any {
		x := new(copyOf)
		x.req.Header.DisableNormalizing()
		return x
	}}
	// inUse is the bytes of the copies queued or being sent, by every route of the
	// worker, within budget.
	inUse atomic.Int64
	// sent, failed and dropped count copies: answered by the mirror, not answered, and
	// never sent (over a bound); for tests and the error log.
	sent, failed, dropped atomic.Uint64
)

// reserve takes cost bytes of the budget, reporting whether they fit.
func reserve(cost int64) bool {
	if inUse.Add(cost) > budget {
		inUse.Add(-cost)
		return false
	}
	return true
}

// enqueue hands x to the client's senders, starting one when fewer than senders run, or
// drops it when the client's queue is full; it never blocks. Each route's client has its
// own queue and senders, so a slow mirror holds back only its own copies, and its senders
// end once its queue is empty: a route built again leaves no goroutine behind.
func (cl *client) enqueue(x *copyOf) bool {
	select {
	case cl.queueOf() <- x:
	default:
		release(x)
		return false
	}
	cl.claimSender()
	return true
}

// queueOf is the client's queue, made on first use.
func (cl *client) queueOf() chan *copyOf {
	if q := cl.queue.Load(); q != nil {
		return *q
	}
	q := make(chan *copyOf, queueLen)
	if cl.queue.CompareAndSwap(nil, &q) {
		return q
	}
	return *cl.queue.Load()
}

// claimSender starts a sender unless senders run already.
func (cl *client) claimSender() {
	for {
		n := cl.running.Load()
		if n >= senders {
			return
		}
		if cl.running.CompareAndSwap(n, n+1) {
			go cl.sendCopies()
			return
		}
	}
}

// sendCopies sends queued copies one at a time until the queue is empty.
func (cl *client) sendCopies() {
	queue := cl.queueOf()
	for {
		select {
		case x := <-queue:
			if err := cl.hc.DoTimeout(&x.req, &x.resp, timeout); err != nil {
				failed.Add(1)
			} else {
				sent.Add(1)
			}
			release(x)
			continue
		default:
		}
		cl.running.Add(-1)
		// A copy queued after the queue looked empty, while every sender still ran, was
		// left to this one: take it up again rather than strand it.
		if len(queue) == 0 {
			return
		}
		n := cl.running.Load()
		if n >= senders || !cl.running.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// release gives x's budget back and x to the pool.
func release(x *copyOf) {
	inUse.Add(-x.cost)
	x.req.Reset()
	x.req.Header.DisableNormalizing()
	x.resp.Reset()
	x.cost = 0
	copies.Put(x)
}
