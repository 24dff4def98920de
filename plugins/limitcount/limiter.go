package limitcount

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// Layout is the limit-count segment's layout: the window table's.
var Layout = shm.Layout{Name: Name, Version: shm.WindowTableVersion}

// defaultSegmentBytes is shm.limit_count's default, for a Config that leaves it unset.
const defaultSegmentBytes = 10 << 20

var segmentSpec = &plugins.SegmentSpec{
	Layout: Layout,
	Size:   segmentDataSize,
	Init:   shm.InitWindowTable,
}

// segmentDataSize makes the whole segment, header included, the configured size.
func segmentDataSize(cfg *conf.Config) int {
	total := int64(defaultSegmentBytes)
	if cfg != nil && cfg.Shm.LimitCount > 0 {
		total = cfg.Shm.LimitCount
	}
	return int(total-shm.HeaderSize) &^ 7
}

// Stats reads the limit-count segment for the metrics export: the keys it can hold, the
// keys with a live window now (estimated from a sample of at most statsSampleSlots slots
// in a larger table), and the live windows evicted to make room since the master started.
// It is safe to call at any time from any process that maps the segment.
func Stats(seg *shm.Segment) (capacity, used, evictions uint64) {
	return stats(seg, shm.Ticks(time.Now().UnixNano()))
}

func stats(seg *shm.Segment, now uint32) (capacity, used, evictions uint64) {
	t, err := shm.OpenWindowTable(seg)
	if err != nil {
		return 0, 0, 0
	}
	return uint64(t.Capacity()), uint64(t.LiveEstimate(now, statsSampleSlots)), t.Evictions()
}

// statsSampleSlots bounds what Stats reads: the default 10m table has about 300,000
// slots, and a whole walk on every scrape cost the worker sharing the master's CPU
// about 1 ms of it and its caches.
const statsSampleSlots = 4096

// Evictions is how many live windows were evicted to make room since the segment was
// made; it reads one word.
func Evictions(seg *shm.Segment) uint64 {
	t, err := shm.OpenWindowTable(seg)
	if err != nil {
		return 0
	}
	return t.Evictions()
}

// Refusals is how many requests were refused because the segment was full and
// shm.limit_count_on_full is "reject", since the master started.
func Refusals(seg *shm.Segment) uint64 {
	t, err := shm.OpenWindowTable(seg)
	if err != nil {
		return 0
	}
	return t.Refusals()
}

var (
	headerLimit      = []byte("X-RateLimit-Limit")
	headerRemaining  = []byte("X-RateLimit-Remaining")
	headerReset      = []byte("X-RateLimit-Reset")
	contentTypeJSON  = []byte("application/json")
	zero             = []byte("0")
	mismatchedBody   = []byte(`{"error_msg":"failed to limit count: group conf mismatched"}` + "\n")
	ticksPerSecond   = uint32(time.Second / shm.Tick)
	errNoSharedTable = errors.New("no shared memory segment for limit-count (the master creates it at start)")
)

// limiter is one route's limit-count instance. It is immutable and shared by every request
// of the route; the counters live in the shared table.
type limiter struct {
	table  *shm.WindowTable
	keys   *keySource
	count  uint64
	window uint32 // ticks
	policy shm.FullPolicy

	showHeaders      bool
	limitValue       []byte // count, formatted once
	rejectedCode     int
	rejectedBody     []byte // nil: no body, as APISIX without rejected_msg
	allowDegradation bool
	logf             func(format string, args ...any)
}

func build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if cfg.Disable {
		return nil, nil
	}
	if env == nil || env.Shared == nil || env.Shared.Segments[Name] == nil {
		return nil, errNoSharedTable
	}
	table, err := shm.OpenWindowTable(env.Shared.Segments[Name])
	if err != nil {
		return nil, err
	}
	if cfg.Group != "" && env.Snapshot != nil {
		if other, mismatched := groupMismatch(env.Snapshot, cfg); mismatched {
			env.Shared.Logf("limit-count: route %s: group %q is configured differently on route %s (group conf mismatched); "+
				"its requests are answered 500 until every route of the group has the same limit-count configuration "+
				"(to change a group's limits, give it a new group name)", routeID(env), cfg.Group, other)
			return mismatched500{}, nil
		}
	}
	base := table.KeyHash()
	if cfg.Group != "" {
		// APISIX: "<group>:<key>", so every route of the group shares one counter per key.
		base.WriteString("group\x00")
		base.WriteString(cfg.Group)
	} else {
		// APISIX: "<route>:<conf hash>:<key>" (a global rule's: "<rule>:..."): a new
		// configuration opens fresh windows, other edits of the route keep them.
		if env.GlobalRuleID != "" {
			base.WriteString("global_rule\x00")
			base.WriteString(env.GlobalRuleID)
		} else {
			base.WriteString("route\x00")
			base.WriteString(routeID(env))
		}
		base.WriteByte(0)
		base.WriteString(cfg.canonical())
	}
	base.WriteByte(0)
	keys, err := newKeySource(base, cfg)
	if err != nil {
		return nil, err
	}
	l := &limiter{
		table:            table,
		keys:             keys,
		count:            uint64(cfg.Count),
		window:           shm.WindowTicks(cfg.Window()),
		policy:           shm.EvictOnFull,
		showHeaders:      cfg.ShowLimitQuotaHeader,
		limitValue:       strconv.AppendInt(nil, cfg.Count, 10),
		rejectedCode:     cfg.RejectedCode,
		allowDegradation: cfg.AllowDegradation,
		logf:             env.Shared.Logf,
	}
	if env.Shared.Config != nil && env.Shared.Config.Shm.LimitCountOnFull == "reject" {
		l.policy = shm.RejectOnFull
	}
	if cfg.RejectedMsg != "" {
		body, err := json.Marshal(struct {
			ErrorMsg string `json:"error_msg"`
		}{cfg.RejectedMsg})
		if err != nil {
			return nil, fmt.Errorf("encoding rejected_msg: %w", err)
		}
		l.rejectedBody = body
	}
	if l.logf == nil {
		l.logf = func(string, ...any) {}
	}
	return l, nil
}

func routeID(env *plugins.Env) string {
	if env.Route == nil {
		return ""
	}
	return env.Route.ID
}

// Access counts the request against its key's window and answers it with rejected_code
// once the window's count is spent.
func (l *limiter) Access(c *plugins.Ctx) bool {
	nanos := c.StartNanos
	if nanos == 0 {
		nanos = time.Now().UnixNano()
	}
	now := shm.Ticks(nanos)
	r := l.table.Hit(l.keys.fingerprint(c), l.count, l.window, now, l.policy)
	if r.Evicted || r.Outcome == shm.Full {
		l.report(now)
	}
	switch r.Outcome {
	case shm.Allowed:
		l.headers(c, l.count-min(r.Used, l.count), r.Left)
		return false
	case shm.Limited:
		l.headers(c, 0, r.Left)
		return l.reject(c)
	}
	// Full: no slot for the key. Evicting lets it through anyway (fail open, like the
	// eviction itself); rejecting refuses it unless the route prefers degradation.
	if l.policy == shm.EvictOnFull || l.allowDegradation {
		return false
	}
	l.headers(c, 0, ticksPerSecond)
	return l.reject(c)
}

// headers queues the X-RateLimit-* headers; Reset is in whole seconds, rounded up, so it
// is never 0 while a window is open.
func (l *limiter) headers(c *plugins.Ctx, remaining uint64, left uint32) {
	if !l.showHeaders {
		return
	}
	var buf [20]byte
	c.AddResponseHeader(headerLimit, l.limitValue)
	if remaining == 0 {
		c.AddResponseHeader(headerRemaining, zero)
	} else {
		c.AddResponseHeader(headerRemaining, strconv.AppendUint(buf[:0], remaining, 10))
	}
	reset := (left + ticksPerSecond - 1) / ticksPerSecond
	c.AddResponseHeader(headerReset, strconv.AppendUint(buf[:0], uint64(reset), 10))
}

func (l *limiter) reject(c *plugins.Ctx) bool {
	resp := &c.Request.Response
	resp.SetStatusCode(l.rejectedCode)
	if l.rejectedBody != nil {
		resp.Header.SetContentTypeBytes(contentTypeJSON)
		resp.SetBodyRaw(l.rejectedBody)
	}
	return true
}

// report logs evictions and refusals, at most once a second across all workers.
func (l *limiter) report(now uint32) {
	evictions, refusals, ok := l.table.Report(now)
	if !ok || evictions+refusals == 0 {
		return
	}
	l.logf("limit-count: shared memory full (%d keys): %d live windows evicted and %d requests refused since the last report; "+
		"raise shm.limit_count in config.yaml", l.table.Capacity(), evictions, refusals)
}

// mismatched500 stands in for a route whose group is configured differently elsewhere.
type mismatched500 struct{}

func (mismatched500) Access(c *plugins.Ctx) bool {
	c.Request.Response.SetStatusCode(fasthttp.StatusInternalServerError)
	c.Request.Response.Header.SetContentTypeBytes(contentTypeJSON)
	c.Request.Response.SetBodyRaw(mismatchedBody)
	return true
}
