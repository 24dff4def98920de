package forwardauth

import (
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// maxAnswerBody bounds what gw reads of the service's answer, which it holds in memory
// to send the client: an answer with a larger body is a failed call (status_on_error).
const maxAnswerBody = 1 << 20

// maxConns bounds the connections one route's instance opens to the service in one
// worker; a call that finds them all busy waits for one within its timeout.
const maxConns = 512

// client calls the authorization service for one route. It is safe for concurrent use.
type client struct {
	hc      *fasthttp.HostClient
	timeout time.Duration
	close   bool // keepalive false: every call closes its connection
	// pool is keepalive_pool, the most connections kept open once idle, and inFlight
	// the calls under way; see do.
	pool     int64
	inFlight atomic.Int64
}

// newClient is c's client. fasthttp's HostClient pools the connections; a call never
// takes longer than c.Timeout (DoTimeout covers the dial, the wait for a free connection
// and the exchange), so a slow or silent service holds a request no longer.
func newClient(c *Config) *client {
	hc := &fasthttp.HostClient{
		Addr:                          c.Target.addr,
		IsTLS:                         c.Target.tls,
		MaxConns:                      maxConns,
		MaxIdleConnDuration:           c.KeepaliveTimeout,
		MaxConnWaitTimeout:            c.Timeout,
		MaxResponseBodySize:           maxAnswerBody,
		ReadTimeout:                   c.Timeout,
		WriteTimeout:                  c.Timeout,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
	}
	if c.Target.tls {
		hc.TLSConfig = &tls.Config{InsecureSkipVerify: !c.SSLVerify} //nolint:gosec // ssl_verify false asks for it
	}
	return &client{hc: hc, timeout: c.Timeout, close: !c.Keepalive, pool: c.KeepalivePool}
}

// call is one call's request and answer, pooled.
type call struct {
	req  fasthttp.Request
	resp fasthttp.Response
}

var callPool = sync.Pool{New: func() any { return new(call) }}

// begin readies a call to the service: method, target and Host, nothing else.
func (cl *client) begin(method, host, requestURI string) *call {
	x := callPool.Get().(*call)
	x.req.Header.SetMethod(method)
	x.req.SetRequestURI(requestURI)
	x.req.Header.SetHost(host)
	if cl.close {
		x.req.SetConnectionClose()
	}
	return x
}

func (x *call) setHeader(name, value []byte) { x.req.Header.SetCanonical(name, value) }
func (x *call) setBody(body []byte)          { x.req.SetBodyRaw(body) }

// do sends the call and reads the answer, within the client's timeout.
//
// keepalive_pool is nginx's idle pool: a connection goes back to it after a call unless
// it already holds pool connections, and is closed otherwise. fasthttp bounds
// connections, not idle ones, so a call decides before it starts: one that starts with
// pool calls already under way closes its connection at the end (Connection: close). At
// most pool calls that keep theirs are then ever under way together, each on an idle
// connection if there is one, so at most pool connections are ever idle.
func (cl *client) do(x *call) error {
	if cl.inFlight.Add(1) > cl.pool {
		x.req.SetConnectionClose()
	}
	err := cl.hc.DoTimeout(&x.req, &x.resp, cl.timeout)
	cl.inFlight.Add(-1)
	return err
}

func (x *call) has(name []byte) bool      { return x.req.Header.PeekBytes(name) != nil }
func (x *call) status() int               { return x.resp.StatusCode() }
func (x *call) header(name []byte) []byte { return x.resp.Header.PeekBytes(name) }
func (x *call) body() []byte              { return x.resp.Body() }

// end returns x to the pool; nothing read from it may be kept.
func (x *call) end() {
	x.req.Reset()
	x.resp.Reset()
	callPool.Put(x)
}
