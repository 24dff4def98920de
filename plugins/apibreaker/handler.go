package apibreaker

import (
	"encoding/json"
	"errors"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
	"gw/shm"
)

// Layout is the api-breaker segment's: a keyed table of breakers. Bump the version when
// the payload's meaning or the key hash changes.
var Layout = shm.Layout{Name: Name, Version: 1}

// tableMagic marks the segment's table as api-breaker's.
const tableMagic = 0x6777_6272_6561_6b31 // "gwbreak1"

// defaultSegmentBytes is shm.api_breaker's default, for a Config that leaves it unset.
const defaultSegmentBytes = 10 << 20

var segmentSpec = &plugins.SegmentSpec{
	Layout: Layout,
	Size:   segmentDataSize,
	Init:   plugins.KeyedTableInit(tableMagic),
}

// Segment is the breakers' table, sized by shm.api_breaker.
func (plugin) Segment() *plugins.SegmentSpec { return segmentSpec }

var _ plugins.SegmentOwner = plugin{}

var segmentDataSize = plugins.SizedBy(func(s *conf.Shm) int64 { return s.APIBreaker }, defaultSegmentBytes)

// A breaker is one payload: APISIX's three shared-dict keys in one word, so that each of
// its changes is one compare-and-swap and no worker sees half of one.
//
//	unhealthy(16) << 40 | healthy(16) << 24 | opened(24)
//
// unhealthy counts unhealthy answers since the breaker last closed; healthy counts
// healthy answers since the last unhealthy one; opened is when the breaker last opened,
// in seconds modulo stampCycle, plus 1 (0: never, or expired as APISIX's key expires
// after max_breaker_sec). A breaker of 0 is closed and forgotten: idle, and its slot may
// go to another key.
const (
	unhealthyShift = 40
	healthyShift   = 24
	countMask      = 1<<16 - 1
	stampMask      = 1<<24 - 1
	stampCycle     = stampMask // stamps are 1..stampCycle
	// saturatedOpenings is where the unhealthy count stops growing, in openings: the
	// count is held between saturatedOpenings and one more opening's worth, keeping its
	// place in the failures cycle, so that 16 bits keep it and the break it gives, 2^24 s
	// or more, stays at max_breaker_sec (at most 2^23 s).
	saturatedOpenings = 24
)

func unhealthyOf(p uint64) uint64 { return p >> unhealthyShift & countMask }
func healthyOf(p uint64) uint64   { return p >> healthyShift & countMask }
func openedOf(p uint64) uint64    { return p & stampMask }

func breakerWord(unhealthy, healthy, opened uint64) uint64 {
	return unhealthy<<unhealthyShift | healthy<<healthyShift | opened
}

// stamp is second s as a breaker keeps it.
func stamp(s int64) uint64 { return uint64(s)%stampCycle + 1 }

// age is how many seconds ago opened was, at now; within a cycle (194 days).
func age(now, opened uint64) uint64 { return (now + stampCycle - opened) % stampCycle }

var errNoSharedTable = errors.New("no shared memory segment for api-breaker (the master creates it at start)")

// breaker is one route's api-breaker instance, shared by every request of the route; the
// breakers live in the shared table, one per request host and path.
type breaker struct {
	table          *shm.KeyedTable
	base           shm.KeyHash
	code           int
	body           []byte // nil: no body (and no headers), as APISIX
	headers        []ResponseHeader
	maxBreak       uint64
	failures       uint64
	successes      uint64
	unhealthy      statusSet
	healthy        statusSet
	now            func() int64 // Unix seconds
	breakTimeTrace func(seconds uint64)
}

var (
	_ plugins.AccessPhase = (*breaker)(nil)
	_ plugins.LogPhase    = (*breaker)(nil)
)

// statusSet is a set of statuses 200-599.
type statusSet [7]uint64

func (s *statusSet) add(code int) { s[(code-200)/64] |= 1 << ((code - 200) % 64) }
func (s *statusSet) has(code int) bool {
	return code >= 200 && code < 600 && s[(code-200)/64]&(1<<((code-200)%64)) != 0
}

// Build makes a route's breaker over the shared table.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if cfg.Disable {
		return nil, nil
	}
	if env.Shared == nil || env.Shared.Segments[Name] == nil {
		return nil, errNoSharedTable
	}
	table, err := shm.OpenKeyedTable(env.Shared.Segments[Name], tableMagic)
	if err != nil {
		return nil, err
	}
	// APISIX keys a breaker by the request's host and uri alone; gw prefixes the route (or
	// the global rule), so that routes never share one.
	base := table.KeyHash()
	if env.GlobalRuleID != "" {
		base.WriteString("global_rule\x00")
		base.WriteString(env.GlobalRuleID)
	} else {
		base.WriteString("route\x00")
		if env.Route != nil {
			base.WriteString(env.Route.ID)
		}
	}
	base.WriteByte(0)
	b := &breaker{
		table:     table,
		base:      base,
		code:      cfg.BreakResponseCode,
		maxBreak:  uint64(cfg.MaxBreakerSec),
		failures:  uint64(cfg.Unhealthy.Failures),
		successes: uint64(cfg.Healthy.Successes),
		now:       func() int64 { return time.Now().Unix() },
	}
	if cfg.BreakResponseBody != nil {
		b.body = []byte(*cfg.BreakResponseBody)
		b.headers = cfg.BreakResponseHeaders
	}
	for _, s := range cfg.Unhealthy.HTTPStatuses {
		b.unhealthy.add(s)
	}
	for _, s := range cfg.Healthy.HTTPStatuses {
		b.healthy.add(s)
	}
	return b, nil
}

var (
	hostVar = conf.Var{Kind: conf.VarHost}
	uriVar  = conf.Var{Kind: conf.VarURI}
)

// fingerprint is the breaker's key: the route, then the request's host and uri (nginx's
// $host and $uri, as APISIX's get_host and ctx.var.uri).
func (b *breaker) fingerprint(c *plugins.Ctx) uint64 {
	r := c.VarsRequest()
	var buf [128]byte
	h := b.base
	v, _ := vars.Value(&r, &hostVar, buf[:0])
	h.Write(v)
	h.WriteByte(0)
	v, _ = vars.Value(&r, &uriVar, buf[:0])
	h.Write(v)
	return h.Sum()
}

// breakTime is how long the breaker stays open after an opening, at unhealthy counts:
// 2^(unhealthy/failures) seconds, at least 2, at most max_breaker_sec, as APISIX.
func (b *breaker) breakTime(unhealthy uint64) uint64 {
	times := max(unhealthy/b.failures, 1)
	if times >= 63 || uint64(1)<<times > b.maxBreak {
		return b.maxBreak
	}
	return uint64(1) << times
}

// Access answers break_response_code while the request's breaker is open.
func (b *breaker) Access(c *plugins.Ctx) error {
	e, ok := b.table.Find(b.fingerprint(c))
	if !ok {
		return nil
	}
	p, ok := e.Load()
	if !ok || unhealthyOf(p) == 0 || openedOf(p) == 0 {
		return nil
	}
	now := stamp(b.now())
	ago := age(now, openedOf(p))
	if ago > b.maxBreak {
		// APISIX's opening expires after max_breaker_sec; forget it, so that it is never
		// mistaken for a recent one a cycle later. Another worker may have changed the
		// breaker meanwhile: then that change stands.
		e.CompareAndSwap(p, p&^stampMask)
		return nil
	}
	bt := b.breakTime(unhealthyOf(p))
	if b.breakTimeTrace != nil {
		b.breakTimeTrace(bt)
	}
	if ago > bt {
		return nil // half open: this request tries the upstream
	}
	b.answer(c)
	return nil
}

// answer is the break response: break_response_code, with the body and headers when a
// body is configured (APISIX sends no headers without one).
func (b *breaker) answer(c *plugins.Ctx) {
	if b.body == nil {
		c.Respond(b.code, nil, nil)
		return
	}
	if len(b.headers) > 0 {
		r := c.VarsRequest()
		var buf [256]byte
		for i := range b.headers {
			v, _ := vars.Expand(buf[:0], &r, &b.headers[i].value)
			c.AddResponseHeader(b.headers[i].key, v)
		}
	}
	c.Respond(b.code, nil, b.body)
}

// Log counts the upstream's answer into the request's breaker: an unhealthy status counts
// up (and every failures-th opens the breaker), a healthy one counts toward closing it
// once it has opened. A request the upstream never saw (a plugin answered, the breaker
// was open) counts nothing; a node that failed to answer counts as its 502 or 504, as
// nginx's $upstream_status.
func (b *breaker) Log(c *plugins.Ctx) {
	if c.UpstreamNanos < 0 {
		return
	}
	status := c.Status()
	unhealthy := b.unhealthy.has(status)
	if !unhealthy && !b.healthy.has(status) {
		return
	}
	fp := b.fingerprint(c)
	for {
		e, ok := b.table.Find(fp)
		if !ok {
			if !unhealthy {
				return // a healthy answer to a breaker never opened
			}
			var existed bool
			first := breakerWord(1, 0, b.openedAt(1, 0))
			if e, existed, ok = b.table.Insert(fp, first, 1, true, time.Now().UnixNano()); !existed {
				return
			}
		}
		p, ok := e.Load()
		if !ok {
			continue
		}
		var next uint64
		if unhealthy {
			n := unhealthyOf(p) + 1
			if n > saturatedOpenings*b.failures {
				n -= b.failures // same place in the failures cycle, the same long break
			}
			next = breakerWord(n, 0, b.openedAt(n, openedOf(p)))
		} else {
			if unhealthyOf(p) == 0 {
				return
			}
			h := healthyOf(p) + 1
			if h >= b.successes {
				next = 0 // closed, and forgotten
			} else {
				next = breakerWord(unhealthyOf(p), h, openedOf(p))
			}
		}
		if e.CompareAndSwap(p, next) {
			return
		}
	}
}

// openedAt is the breaker's opening after its count became n: now on every failures-th
// unhealthy answer, as APISIX, otherwise as it was.
func (b *breaker) openedAt(n, opened uint64) uint64 {
	if n%b.failures == 0 {
		return stamp(b.now())
	}
	return opened
}
