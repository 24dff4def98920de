package limitreq

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/limitkey"
	"gw/shm"
)

// Layout is the limit-req segment's: a keyed table (shm.KeyedTable) whose payload is a
// bucket's clock. Bump the version when the payload's meaning or the key hash changes: a
// binary upgrade then starts with empty buckets rather than misread ones.
var Layout = shm.Layout{Name: Name, Version: 1}

// tableMagic marks the segment's table as limit-req's.
const tableMagic = 0x6777_6c69_6d72_7131 // "gwlimrq1"

// defaultSegmentBytes is shm.limit_req's default, for a Config that leaves it unset.
const defaultSegmentBytes = 10 << 20

// tickNanos is the unit of a bucket's clock, 100 ns: 56 bits of it last 228 years from
// the Unix epoch, and an interval of 1/maxRate is one.
const tickNanos = 100

var segmentSpec = &plugins.SegmentSpec{
	Layout: Layout,
	Size:   segmentDataSize,
	Init:   plugins.KeyedTableInit(tableMagic),
}

// Segment is the buckets' table, sized by shm.limit_req.
func (plugin) Segment() *plugins.SegmentSpec { return segmentSpec }

var _ plugins.SegmentOwner = plugin{}

var segmentDataSize = plugins.SizedBy(func(s *conf.Shm) int64 { return s.LimitReq }, defaultSegmentBytes)

var (
	contentTypeJSON  = []byte("application/json")
	errNoSharedTable = errors.New("no shared memory segment for limit-req (the master creates it at start)")
	// errContended is APISIX's answer when its limiter fails: 500, unless
	// allow_degradation.
	errContended = errors.New("failed to limit req: the key's slot in the shared table kept changing owner")
)

// limiter is one route's limit-req instance. It is immutable and shared by every request
// of the route; the buckets live in the shared table.
//
// A bucket is a time in ticks, nginx's excess seen from the clock: excess = (at - now) *
// rate. nginx's request at now makes excess max(excess - rate*elapsed + 1, 0), which is
// at = max(at + interval, now); it is rejected when that excess is over burst, at - now >
// burst intervals, and otherwise waits excess/rate, at - now. A key seen for the first
// time has excess 0, as in nginx: its bucket is created at now. A bucket with at +
// interval <= now would take its next request as a new key's, so it is idle, and its
// slot may go to another key.
type limiter struct {
	table        *shm.KeyedTable
	keys         *limitkey.Source
	interval     uint64 // ticks per request, 1/rate
	limit        uint64 // the most excess allowed, in ticks: burst intervals
	nodelay      bool
	degrade      bool // allow_degradation
	rejectedCode int
	rejectedBody []byte // nil: no body, as APISIX without rejected_msg
	sleep        func(time.Duration)
	now          func() int64
	// maxTries is the constant maxTries; a test lowers it to make the bucket one that
	// cannot be taken.
	maxTries int
}

var _ plugins.AccessPhase = (*limiter)(nil)

// Build makes a route's limiter over the shared table.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if cfg.Disable {
		return nil, nil
	}
	if cfg.Policy != "local" {
		key, err := limitkey.Parse(cfg.KeyType, cfg.Key)
		if err != nil {
			return nil, err
		}
		return buildRedis(cfg, env, key)
	}
	if env.Shared == nil || env.Shared.Segments[Name] == nil {
		return nil, errNoSharedTable
	}
	table, err := shm.OpenKeyedTable(env.Shared.Segments[Name], tableMagic)
	if err != nil {
		return nil, err
	}
	// APISIX: "<resource key>:<conf version>:<key>": a global rule's buckets are the
	// rule's, shared by its routes; a new configuration opens fresh buckets.
	key, err := limitkey.Parse(cfg.KeyType, cfg.Key)
	if err != nil {
		return nil, err
	}
	keys := limitkey.NewSource(limitkey.Base(table, env, cfg.canonical()), key)
	interval := uint64(math.Round(1e9 / tickNanos / cfg.Rate))
	l := &limiter{
		table:        table,
		keys:         keys,
		interval:     interval,
		limit:        uint64(math.Floor(cfg.Burst*float64(interval) + 0.5)),
		nodelay:      cfg.NoDelay,
		degrade:      cfg.AllowDegradation,
		rejectedCode: cfg.RejectedCode,
		sleep:        time.Sleep,
		now:          wallNanos,
		maxTries:     maxTries,
	}
	if cfg.RejectedMsg != "" {
		if l.rejectedBody, err = rejectedBody(cfg.RejectedMsg); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// wallNanos is the wall clock, which every worker reads alike; the buckets are shared by
// processes, whose monotonic clocks start apart.
func wallNanos() int64 { return time.Now().UnixNano() }

// minDelay is the shortest wait worth sleeping, as APISIX's (delay >= 0.001).
const minDelay = time.Millisecond

// Access takes the request into its key's bucket, answering rejected_code when the bucket
// is over burst, and otherwise waiting its turn (excess/rate) unless nodelay. The wait
// sleeps this request's goroutine only: the worker serves every connection on its own.
func (l *limiter) Access(c *plugins.Ctx) error {
	nanos := l.now()
	now := uint64(nanos / tickNanos)
	fp := l.keys.Fingerprint(c)
	for tries := 0; ; tries++ {
		if tries >= l.maxTries {
			return l.unavailable()
		}
		e, ok := l.table.Find(fp)
		if !ok {
			// A new key's bucket starts empty at now and takes this request with excess
			// 0; a full table bucket evicts the key closest to empty.
			var existed bool
			if e, existed, ok = l.table.Insert(fp, now, now+1-min(l.interval, now), true, nanos); !existed {
				return nil // ok with evict: a bucket always has a slot to give
			}
		}
		at, ok := e.Load()
		if !ok {
			continue // the slot changed owner between Find and Load
		}
		next := max(at+l.interval, now)
		excess := next - now // in ticks: the wait
		if excess > l.limit {
			l.reject(c)
			return nil
		}
		if !e.CompareAndSwap(at, next) {
			continue // another request moved the bucket: take it again from there
		}
		if wait := time.Duration(excess * tickNanos); wait >= minDelay && !l.nodelay {
			l.sleep(wait)
		}
		return nil
	}
}

// maxTries bounds the attempts to take a key's bucket while its slot changes owner under
// it (other keys evicting it, in a table full of busy keys): a worker never spins.
const maxTries = 64

// unavailable is the answer when the bucket could not be taken: the limiter is
// unavailable, and APISIX's allow_degradation lets the request through unlimited;
// otherwise it is a 500.
func (l *limiter) unavailable() error {
	if l.degrade {
		return nil
	}
	return errContended
}

// reject answers rejected_code, with rejected_msg's body when there is one.
func (l *limiter) reject(c *plugins.Ctx) {
	var contentType []byte
	if l.rejectedBody != nil {
		contentType = contentTypeJSON
	}
	c.Respond(l.rejectedCode, contentType, l.rejectedBody)
}

// rejectedBody is rejected_msg's body: {"error_msg": msg}.
func rejectedBody(msg string) ([]byte, error) {
	body, err := json.Marshal(struct {
		ErrorMsg string `json:"error_msg"`
	}{msg})
	if err != nil {
		return nil, fmt.Errorf("encoding rejected_msg: %w", err)
	}
	return body, nil
}
