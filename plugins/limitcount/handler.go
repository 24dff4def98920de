package limitcount

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// Layout is the limit-count segment's layout: the window table's.
var Layout = shm.Layout{Name: Name, Version: WindowTableVersion}

// defaultSegmentBytes is shm.limit_count's default, for a Config that leaves it unset.
const defaultSegmentBytes = 10 << 20

// Segment is the window table's: its size from shm.limit_count, and its use for the
// metrics export.
func (plugin) Segment() *plugins.SegmentSpec { return segmentSpec }

var segmentSpec = &plugins.SegmentSpec{
	Layout:    Layout,
	Size:      segmentDataSize,
	Init:      InitWindowTable,
	FreeBytes: freeBytes,
	Evictions: evictions,
}

var _ plugins.SegmentOwner = plugin{}

var segmentDataSize = plugins.SizedBy(func(s *conf.Shm) int64 { return s.LimitCount }, defaultSegmentBytes)

// freeBytes is the segment's share of slots without a live window now, estimated from a
// sample (stats).
func freeBytes(seg *shm.Segment) int { return freeBytesAt(seg, Ticks(time.Now().UnixNano())) }

func freeBytesAt(seg *shm.Segment, now uint32) int {
	capacity, used, _ := stats(seg, now)
	if capacity == 0 {
		return 0
	}
	return int(uint64(seg.Size()) * (capacity - used) / capacity)
}

// stats reads the limit-count segment for the metrics export: the keys it can hold, the
// keys with a live window now (estimated from a sample of at most statsSampleSlots slots
// in a larger table), and the live windows evicted to make room since the master started.
// It is safe to call at any time from any process that maps the segment.
func stats(seg *shm.Segment, now uint32) (capacity, used, evictions uint64) {
	t, err := OpenWindowTable(seg)
	if err != nil {
		return 0, 0, 0
	}
	return uint64(t.Capacity()), uint64(t.LiveEstimate(now, statsSampleSlots)), t.Evictions()
}

// statsSampleSlots bounds what stats reads: the default 10m table has about 300,000
// slots, and a whole walk on every scrape cost the worker sharing the master's CPU
// about 1 ms of it and its caches.
const statsSampleSlots = 4096

// evictions is how many live windows were evicted to make room since the segment was
// made; it reads one word.
func evictions(seg *shm.Segment) uint64 {
	t, err := OpenWindowTable(seg)
	if err != nil {
		return 0
	}
	return t.Evictions()
}

var (
	headerLimit      = []byte("X-RateLimit-Limit")
	headerRemaining  = []byte("X-RateLimit-Remaining")
	headerReset      = []byte("X-RateLimit-Reset")
	contentTypeJSON  = []byte("application/json")
	zero             = []byte("0")
	ticksPerSecond   = uint32(time.Second / Tick)
	errNoSharedTable = errors.New("no shared memory segment for limit-count (the master creates it at start)")
)

// limiter is one route's limit-count instance. It is immutable and shared by every request
// of the route; the counters live in the shared table.
type limiter struct {
	table  *WindowTable
	keys   *keySource
	count  uint64
	window uint32 // ticks
	policy FullPolicy

	showHeaders      bool
	limitValue       []byte // count, formatted once
	rejectedCode     int
	rejectedBody     []byte // nil: no body, as APISIX without rejected_msg
	allowDegradation bool
	logf             func(format string, args ...any)
}

// BuildSnapshot indexes the snapshot's groups once, for every route's instance.
func (plugin) BuildSnapshot(snap *conf.Snapshot, _ *plugins.Shared) (any, error) {
	return indexGroups(snap), nil
}

var (
	_ plugins.SnapshotBuilder = plugin{}
	_ plugins.AccessPhase     = (*limiter)(nil)
	_ plugins.AccessPhase     = groupMismatched{}
)

// Build makes a route's limiter over the shared table, or, for a route whose group is
// configured differently elsewhere, an instance that fails every request.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if cfg.Disable {
		return nil, nil
	}
	if byGroup, _ := env.SnapshotState.(groups); cfg.Group != "" {
		if other, mismatched := byGroup.mismatch(cfg); mismatched {
			logf(env)("limit-count: route %s: group %q is configured differently on route %s (group conf mismatched); "+
				"its requests are answered 500 until every route of the group has the same limit-count configuration "+
				"(to change a group's limits, give it a new group name)", routeID(env), cfg.Group, other)
			return groupMismatched{}, nil
		}
	}
	if cfg.Policy != "local" {
		common, err := newLimiter(cfg, env)
		if err != nil {
			return nil, err
		}
		return buildRedis(cfg, env, common)
	}
	if env.Shared == nil || env.Shared.Segments[Name] == nil {
		return nil, errNoSharedTable
	}
	table, err := OpenWindowTable(env.Shared.Segments[Name])
	if err != nil {
		return nil, err
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
	l, err := newLimiter(cfg, env)
	if err != nil {
		return nil, err
	}
	l.table, l.keys = table, keys
	if env.Shared.Config != nil && env.Shared.Config.Shm.LimitCountOnFull == "reject" {
		l.policy = RejectOnFull
	}
	return l, nil
}

// newLimiter is the part of a limiter every policy has: the limit, the headers and the
// rejection.
func newLimiter(cfg *Config, env *plugins.Env) (*limiter, error) {
	l := &limiter{
		count:            uint64(cfg.Count),
		window:           WindowTicks(cfg.Window()),
		policy:           EvictOnFull,
		showHeaders:      cfg.ShowLimitQuotaHeader,
		limitValue:       strconv.AppendInt(nil, cfg.Count, 10),
		rejectedCode:     cfg.RejectedCode,
		allowDegradation: cfg.AllowDegradation,
		logf:             logf(env),
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
	return l, nil
}

// logf is the worker's error log, or nothing without one.
func logf(env *plugins.Env) func(format string, args ...any) {
	if env.Shared == nil || env.Shared.Logf == nil {
		return func(string, ...any) {}
	}
	return env.Shared.Logf
}

func routeID(env *plugins.Env) string {
	if env.Route == nil {
		return ""
	}
	return env.Route.ID
}

// Access counts the request against its key's window and answers it with rejected_code
// once the window's count is spent.
func (l *limiter) Access(c *plugins.Ctx) error {
	nanos := c.StartNanos
	if nanos == 0 {
		nanos = time.Now().UnixNano()
	}
	now := Ticks(nanos)
	r := l.table.Hit(l.keys.fingerprint(c), l.count, l.window, now, l.policy)
	if r.Evicted || r.Outcome == Full {
		l.report(now)
	}
	switch r.Outcome {
	case Allowed:
		l.headers(c, l.count-min(r.Used, l.count), r.Left)
		return nil
	case Limited:
		l.headers(c, 0, r.Left)
		l.reject(c)
		return nil
	}
	// Full: no slot for the key. Evicting lets it through anyway (fail open, like the
	// eviction itself); rejecting refuses it unless the route prefers degradation.
	if l.policy == EvictOnFull || l.allowDegradation {
		return nil
	}
	l.headers(c, 0, ticksPerSecond)
	l.reject(c)
	return nil
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

// reject answers rejected_code, with rejected_msg's body when there is one.
func (l *limiter) reject(c *plugins.Ctx) {
	var contentType []byte
	if l.rejectedBody != nil {
		contentType = contentTypeJSON
	}
	c.Respond(l.rejectedCode, contentType, l.rejectedBody)
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

// errGroupMismatched is APISIX's error for a group configured differently on its routes;
// the worker answers it 500 {"error_msg":"failed to limit count: group conf mismatched"}.
var errGroupMismatched = errors.New("failed to limit count: group conf mismatched")

// groupMismatched stands in for a route whose group is configured differently elsewhere:
// counting it with either configuration would break the other's promise.
type groupMismatched struct{}

func (groupMismatched) Access(*plugins.Ctx) error { return errGroupMismatched }
