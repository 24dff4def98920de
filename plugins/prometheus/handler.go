package prometheus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"gw/plugins"
	"gw/shm"
)

// maxCachedPerRoute bounds one route's cache of resolved label sets (status code, node
// and consumer vary per request). Past it, new sets are resolved in the table on every
// request: slower, still exact, and memory stays flat.
const maxCachedPerRoute = 1024

// recorder is the plugin's instance for one route in one worker and one config snapshot.
// Everything fixed per route is resolved in build; per request it hashes (code, node,
// consumer, matched uri and host) to a cached entry and adds to its counters.
type recorder struct {
	table   *Table
	route   string // the route label: id, or name with prefer_name
	service string // the service label, likewise

	cache   atomic.Pointer[map[uint64]*resolved] // copy-on-write; read without a lock
	cacheMu sync.Mutex                           // serialises writers of cache
	// last is the entry the route's last request counted in: a route mostly answers with
	// one status from one node, and comparing with it costs less than hashing.
	last atomic.Pointer[resolved]
}

// is reports whether s is the entry for k.
func (s *resolved) is(k *seriesKey) bool {
	return s.code == k.code && s.node == string(k.node) && s.consumer == k.consumer &&
		s.uri == k.uri && s.host == k.host
}

// seriesKey is what a request's label set has of its own: the rest is the route's.
type seriesKey struct {
	code     int
	node     []byte
	consumer string
	// uri and host are the route's path and host the request matched (plugins.Ctx's
	// MatchedURI and MatchedHost): strings the router holds, so the comparison of the
	// same one mostly stops at its pointer.
	uri, host string
}

// resolved is one label set this route has seen and the entry it counts in.
type resolved struct {
	code      int
	node      string
	consumer  string
	uri, host string
	c         *counters
}

var _ plugins.LogPhase = (*recorder)(nil)

// Build makes a route's recorder, its labels resolved, over the metrics segment.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
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
	r := &recorder{table: t, route: route.ID, service: route.ServiceID}
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
	s := r.series(&seriesKey{c.Status(), c.Node, c.Consumer, c.MatchedURI, c.MatchedHost})
	cs := s.c
	cs.latency[latencyRequest].observe(total)
	apisix := total
	if c.UpstreamNanos >= 0 {
		cs.latency[latencyUpstream].observe(c.UpstreamNanos)
		apisix = max(total-c.UpstreamNanos, 0)
	}
	cs.latency[latencyApisix].observe(apisix)
	atomic.AddUint64(&cs.ingress, uint64(c.RequestSize()))
	atomic.AddUint64(&cs.egress, uint64(c.ResponseSize()))
}

// series returns the cached entry for k, resolving it on first use.
func (r *recorder) series(k *seriesKey) *resolved {
	if s := r.last.Load(); s != nil && s.is(k) {
		return s
	}
	h := fnvByte(fnvByte(fnvOffset, byte(k.code>>8)), byte(k.code))
	h = fnvByte(fnvBytes(h, k.node), 0xff)
	h = fnvByte(fnvString(h, k.consumer), 0xff)
	h = fnvByte(fnvString(h, k.uri), 0xff)
	h = fnvString(h, k.host)
	s := (*r.cache.Load())[h]
	if s == nil || !s.is(k) {
		s = r.resolveSlow(h, k)
	}
	r.last.Store(s)
	return s
}

func (r *recorder) resolveSlow(h uint64, k *seriesKey) *resolved {
	l := labels{code: k.code}
	l.values[labelRoute] = r.route
	l.values[labelMatchedURI] = k.uri
	l.values[labelMatchedHost] = k.host
	l.values[labelService] = r.service
	l.values[labelConsumer] = k.consumer
	l.values[labelNode] = nodeIP(k.node)
	s := &resolved{code: k.code, node: string(k.node), consumer: k.consumer, uri: k.uri, host: k.host, c: r.table.counters(r.table.resolve(&l))}

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
