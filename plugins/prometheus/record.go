package prometheus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"gw/plugins"
	"gw/shm"
)

// maxCachedPerRoute bounds one route's cache of resolved label sets (status code, node
// and consumer vary per request). Past it, new sets are resolved in the table on every
// request: slower, still exact, and memory stays flat.
const maxCachedPerRoute = 1024

// recorder is the plugin's instance for one route in one worker and one config snapshot.
// Everything fixed per route is resolved in build; per request it hashes (code, node,
// consumer) to a cached entry and adds to its counters.
type recorder struct {
	table *Table
	route string // the route label: id, or name with prefer_name
	// service, matchedURI and matchedHost are the other per-route label values.
	service, matchedURI, matchedHost string

	cache   atomic.Pointer[map[uint64]*resolved] // copy-on-write; read without a lock
	cacheMu sync.Mutex                           // serialises writers of cache
	// last is the entry the route's last request counted in: a route mostly answers with
	// one status from one node, and comparing with it costs less than hashing.
	last atomic.Pointer[resolved]
}

// is reports whether s is the entry for (code, node, consumer).
func (s *resolved) is(code int, node []byte, consumer string) bool {
	return s.code == code && s.node == string(node) && s.consumer == consumer
}

// resolved is one label set this route has seen and the entry it counts in.
type resolved struct {
	code     int
	node     string
	consumer string
	c        *counters
}

func build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if cfg.Disable {
		return nil, nil
	}
	seg := env.Shared.Segments[Name]
	if seg == nil {
		return nil, fmt.Errorf("no metrics segment: the master did not pass one")
	}
	t, err := tableFor(seg)
	if err != nil {
		return nil, err
	}
	return newRecorder(t, cfg, env.Route), nil
}

// tables caches one Table per segment, so that building a snapshot's routes checks the
// segment once.
var tables sync.Map // *shm.Segment → *Table

func tableFor(seg *shm.Segment) (*Table, error) {
	if t, ok := tables.Load(seg); ok {
		return t.(*Table), nil
	}
	t, err := OpenTable(seg)
	if err != nil {
		return nil, err
	}
	actual, _ := tables.LoadOrStore(seg, t)
	return actual.(*Table), nil
}

func newRecorder(t *Table, cfg *Config, route *plugins.RouteInfo) *recorder {
	r := &recorder{table: t, route: route.ID, service: route.ServiceID, matchedURI: route.URI, matchedHost: route.Host}
	if cfg.PreferName {
		// APISIX: the name when there is one, else the id.
		if route.Name != "" {
			r.route = route.Name
		}
		if route.ServiceName != "" {
			r.service = route.ServiceName
		}
	}
	empty := map[uint64]*resolved{}
	r.cache.Store(&empty)
	return r
}

// Log records one finished request: two or three latency observations and two bandwidth
// counts, eight atomic adds into shared memory. The entry is per status code, so its
// request histogram's count is also its apisix_http_status count.
func (r *recorder) Log(c *plugins.Ctx) {
	total := c.AnsweredAt() - c.StartNanos
	resp := &c.Request.Response
	s := r.series(resp.StatusCode(), c.Node, c.Consumer)
	cs := s.c
	cs.latency[latencyRequest].observe(total)
	apisix := total
	if c.UpstreamNanos >= 0 {
		cs.latency[latencyUpstream].observe(c.UpstreamNanos)
		apisix = max(total-c.UpstreamNanos, 0)
	}
	cs.latency[latencyApisix].observe(apisix)
	atomic.AddUint64(&cs.ingress, uint64(requestLength(&c.Request.Request)))
	atomic.AddUint64(&cs.egress, uint64(responseLength(resp, c.BodySent)))
}

// series returns the cached entry for (code, node, consumer), resolving it on first use.
func (r *recorder) series(code int, node []byte, consumer string) *resolved {
	if s := r.last.Load(); s != nil && s.is(code, node, consumer) {
		return s
	}
	h := fnvByte(fnvByte(fnvOffset, byte(code>>8)), byte(code))
	h = fnvByte(fnvBytes(h, node), 0xff)
	h = fnvString(h, consumer)
	s := (*r.cache.Load())[h]
	if s == nil || !s.is(code, node, consumer) {
		s = r.resolveSlow(h, code, node, consumer)
	}
	r.last.Store(s)
	return s
}

func (r *recorder) resolveSlow(h uint64, code int, node []byte, consumer string) *resolved {
	l := labels{code: code}
	l.values[labelRoute] = r.route
	l.values[labelMatchedURI] = r.matchedURI
	l.values[labelMatchedHost] = r.matchedHost
	l.values[labelService] = r.service
	l.values[labelConsumer] = consumer
	l.values[labelNode] = nodeIP(node)
	s := &resolved{code: code, node: string(node), consumer: consumer, c: r.table.counters(r.table.resolve(&l))}

	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	old := *r.cache.Load()
	if _, taken := old[h]; taken || len(old) >= maxCachedPerRoute {
		return s // a hash collision or a full cache: this set stays uncached
	}
	next := make(map[uint64]*resolved, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[h] = s
	r.cache.Store(&next)
	return s
}

// nodeIP is APISIX's node label, the balancer's address without the port:
// "127.0.0.1:80" → "127.0.0.1", "[::1]:80" → "::1". A name node keeps its name.
func nodeIP(node []byte) string {
	if i := bytes.LastIndexByte(node, ':'); i >= 0 && bytes.IndexByte(node[i:], ']') < 0 {
		node = node[:i]
	}
	return string(bytes.TrimSuffix(bytes.TrimPrefix(node, []byte("[")), []byte("]")))
}

// requestLength is nginx's $request_length as near as fasthttp allows: the request line,
// the header as received, and the body's declared length.
func requestLength(req *fasthttp.Request) int {
	h := &req.Header
	n := len(h.Method()) + 1 + len(h.RequestURI()) + 1 + len(h.Protocol()) + 2
	n += len(h.RawHeaders())
	if cl := h.ContentLength(); cl > 0 {
		n += cl
	}
	return n
}

// responseLength is nginx's $bytes_sent as near as the log phase can know it: the status
// line, the header fields as they stand (Date added, as the server will), and the body's
// length: bodySent, what went out of a streamed body, unless it is -1 (the response holds
// its body). Fields are summed rather than serialised, which costs a third as much; the
// server's default Server line is not counted. A stream nobody counted counts its
// Content-Length, or 0 when that is unknown.
func responseLength(resp *fasthttp.Response, bodySent int64) int {
	h := &resp.Header
	code := h.StatusCode()
	n := len("HTTP/1.1 200 ") + len(fasthttp.StatusMessage(code)) + 2 + len(dateLine) + 2
	for k, v := range h.All() {
		n += len(k) + 2 + len(v) + 2
	}
	switch {
	case bodySent >= 0:
		n += int(bodySent)
	case resp.IsBodyStream():
		if cl := h.ContentLength(); cl > 0 {
			n += cl
		}
	default:
		n += len(resp.Body())
	}
	return n
}

// dateLine is the shape of the Date field fasthttp's server adds to every response.
const dateLine = "Date: Wed, 21 Oct 2015 07:28:00 GMT\r\n"
