package limitconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/limitkey"
	"gw/shm"
)

// Layout is the limit-conn segment's: a keyed table of counts, ledgers and owners
// (ledger.go). Bump the version when a payload's meaning or the key hash changes.
var Layout = shm.Layout{Name: Name, Version: 1}

// tableMagic marks the segment's table as limit-conn's.
const tableMagic = 0x6777_6c69_6d63_6e31 // "gwlimcn1"

// defaultSegmentBytes is shm.limit_conn's default, for a Config that leaves it unset.
const defaultSegmentBytes = 10 << 20

var segmentSpec = &plugins.SegmentSpec{
	Layout: Layout,
	Size:   segmentDataSize,
	Init:   plugins.KeyedTableInit(tableMagic),
}

// Segment is the counts' table, sized by shm.limit_conn.
func (plugin) Segment() *plugins.SegmentSpec { return segmentSpec }

var _ plugins.SegmentOwner = plugin{}

var segmentDataSize = plugins.SizedBy(func(s *conf.Shm) int64 { return s.LimitConn }, defaultSegmentBytes)

var (
	contentTypeJSON  = []byte("application/json")
	errNoSharedTable = errors.New("no shared memory segment for limit-conn (the master creates it at start)")
	// errFull is APISIX's answer when its shared dict fails: 500, unless
	// allow_degradation.
	errFull = errors.New("failed to limit conn: the shared table has no room for the key (raise shm.limit_conn in config.yaml)")
)

// limiter is one route's limit-conn instance, shared by every request of the route; the
// counts live in the shared table. unitDelay is this worker's estimate of a request's
// latency, as APISIX's per-worker limiter keeps it.
type limiter struct {
	table            *shm.KeyedTable
	keys             *limitkey.Source
	ledger           uint64
	hasLedger        bool
	max, maxInFlight uint64
	unitDelay        atomic.Int64 // nanoseconds
	onlyDefaultDelay bool
	rejectedCode     int
	rejectedBody     []byte
	allowDegradation bool
	sleep            func(time.Duration)
	now              func() int64
}

var (
	_ plugins.AccessPhase = (*limiter)(nil)
	_ plugins.LogPhase    = (*limiter)(nil)
)

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
	seg := env.Shared.Segments[Name]
	table, err := shm.OpenKeyedTable(seg, tableMagic)
	if err != nil {
		return nil, err
	}
	if table.Capacity() > maxSlots {
		return nil, fmt.Errorf("limit-conn: the table holds %d slots, more than its counts can name (%d); lower shm.limit_conn", table.Capacity(), maxSlots)
	}
	key, err := limitkey.Parse(cfg.KeyType, cfg.Key)
	if err != nil {
		return nil, err
	}
	l := &limiter{
		table:            table,
		keys:             limitkey.NewSource(limitkey.Base(table, env, cfg.canonical()), key),
		max:              uint64(cfg.Conn),
		maxInFlight:      uint64(cfg.Conn + cfg.Burst),
		onlyDefaultDelay: cfg.OnlyUseDefaultDelay,
		rejectedCode:     cfg.RejectedCode,
		allowDegradation: cfg.AllowDegradation,
		sleep:            time.Sleep,
		now:              wallNanos,
	}
	l.unitDelay.Store(int64(cfg.DefaultConnDelay * float64(time.Second)))
	l.ledger, l.hasLedger = claimLedger(seg, table, time.Now().UnixNano())
	if !l.hasLedger && env.Shared.Logf != nil {
		env.Shared.Logf("limit-conn: no free ledger in shared memory (%d processes serve it); "+
			"what this worker holds if it is killed stays held", maxLedgers)
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

func wallNanos() int64 { return time.Now().UnixNano() }

// minDelay is the shortest wait worth sleeping, as APISIX's (delay >= 0.001).
const minDelay = time.Millisecond

// Access takes a place in the key's count: past conn + burst the request is answered
// rejected_code; past conn it waits unit delay × floor((in flight - 1) / conn), as
// resty.limit.conn, on its own goroutine.
func (l *limiter) Access(c *plugins.Ctx) error {
	nanos := l.now()
	fp := l.keys.Fingerprint(c)
	var ledgerFP uint64
	if l.hasLedger {
		ledgerFP = ledgerKey(l.table, fp, l.ledger)
	}
	for tries := 0; ; tries++ {
		if tries == maxTries {
			// Slots change under a request only when other processes give them to other
			// keys, so this is a bucket churning faster than a request can take a place
			// in it: answered as a full table, never a worker spinning. (The key's own
			// count and ledger entry once took each other's slot here forever, when
			// both fell in one bucket; InsertBeside keeps them apart.)
			return l.degrade()
		}
		count, ok := l.table.Find(fp)
		if !ok {
			if count, _, ok = l.table.Insert(fp, 0, idleBelow, false, nanos); !ok {
				return l.degrade()
			}
		}
		// The ledger first: a worker killed before the count's swap leaves the ledger
		// saying one more than the count got, which the master's release absorbs.
		var ledger shm.Entry
		if l.hasLedger {
			if ledger, ok = l.addLedger(ledgerFP, count, nanos); !ok {
				return l.degrade()
			}
		}
		p, ok := count.Load()
		if !ok {
			l.dropLedger(ledger)
			continue // the count's slot went to another key: find it again
		}
		inFlight := countOf(p) + 1
		if inFlight > l.maxInFlight {
			l.dropLedger(ledger)
			l.reject(c)
			return nil
		}
		if !count.CompareAndSwap(p, p+countUnit) {
			l.dropLedger(ledger)
			continue
		}
		var delay time.Duration
		if inFlight > l.max {
			delay = time.Duration(l.unitDelay.Load()) * time.Duration((inFlight-1)/l.max)
		}
		if !c.AddHold(plugins.Hold{Owner: l, Entries: [2]shm.Entry{count, ledger}, Nanos: int64(delay)}) {
			take(count, 1)
			l.dropLedger(ledger)
		}
		if delay >= minDelay {
			l.sleep(delay)
		}
		return nil
	}
}

// addLedger adds one to this process's ledger entry for count.
func (l *limiter) addLedger(fp uint64, count shm.Entry, nanos int64) (shm.Entry, bool) {
	for tries := 0; tries < maxTries; tries++ {
		e, ok := l.table.Find(fp)
		if !ok {
			// Beside the count: it is idle until this request's place is added, and a
			// plain Insert could take its slot, as the count's could take the ledger's.
			e, existed, ok := l.table.InsertBeside(fp, ledgerPayload(l.ledger, count, 1), idleBelow, count, nanos)
			if !ok || !existed {
				return e, ok
			}
			continue
		}
		p, ok := e.Load()
		if !ok {
			continue
		}
		// An idle ledger entry may still name the key's previous slot: name this one.
		if e.CompareAndSwap(p, ledgerPayload(l.ledger, count, countOf(p)+1)) {
			return e, true
		}
	}
	return shm.Entry{}, false
}

// dropLedger takes back one from a ledger entry (none without a ledger).
func (l *limiter) dropLedger(e shm.Entry) {
	if l.hasLedger {
		take(e, 1)
	}
}

// maxTries bounds the attempts to take a key's place while its slots change under it.
const maxTries = 64

// degrade is the answer when the table has no room for the key.
func (l *limiter) degrade() error {
	if l.allowDegradation {
		return nil
	}
	return errFull
}

// Log gives the request's place back: to the count first, then the ledger (a worker
// killed between the two leaves its ledger saying more, which the master's release
// absorbs, rather than a count that never falls). Unless only_use_default_delay, the
// request's latency moves the worker's unit delay halfway to it: the upstream's time when
// proxied, the request's time less its own delay otherwise, as APISIX.
func (l *limiter) Log(c *plugins.Ctx) {
	h, ok := c.TakeHold(l)
	if !ok {
		return // the access phase never ran, or rejected
	}
	take(h.Entries[0], 1)
	l.dropLedger(h.Entries[1])
	if l.onlyDefaultDelay {
		return
	}
	latency := c.UpstreamNanos
	if latency < 0 {
		latency = c.AnsweredAt() - c.StartNanos - h.Nanos
	}
	if latency >= 0 {
		l.unitDelay.Store((latency + l.unitDelay.Load()) / 2)
	}
}

// reject answers rejected_code, with rejected_msg's body when there is one.
func (l *limiter) reject(c *plugins.Ctx) {
	var contentType []byte
	if l.rejectedBody != nil {
		contentType = contentTypeJSON
	}
	c.Respond(l.rejectedCode, contentType, l.rejectedBody)
}
