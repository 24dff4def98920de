package limitcount

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"time"

	"gw/internal/bytesconv"
)

// coalescer joins a limiter's concurrent requests for one key into one count in Redis.
// While a call for key K is in flight, the requests for K that arrive wait together in
// the next batch; when the call returns, the first of them (the batch's leader) sends
// one call of cost N for the N of them, and the rest wait for its reply. A leader yields
// once before it sends, so that the worker's requests already runnable join it too. A
// worker with many connections on one hot key so sends a call per round trip instead of
// a call per request, and parses one reply per batch.
//
// It is exact: the script adds the cost to the window's count, rejected requests
// included, as APISIX's does, so one call of cost N leaves Redis as N calls of cost 1 in
// a row would, and Redis runs each script alone, so no other gateway's count falls
// between them. The batch's requests take the counts after the call's first, second, ...
// N-th unit, in the order they joined: the same outcomes, and the same
// X-RateLimit-Remaining, as N calls in a row.
//
// No request waits longer for Redis than redis_timeout: a leader sends with the deadline
// of its own arrival, and waits first for the call in flight, whose sender arrived
// earlier and so gives up earlier; the others of its batch arrived after it.
//
// Its bookkeeping allocates nothing once warm: batches and per-key records are kept for
// reuse, and a record's key is a view of its own buffer (see keyCalls). Safe for
// concurrent use.
type coalescer struct {
	// send counts cost against key in Redis (limit and window are the limiter's), bounded
	// by ctx, and returns the window's count after it and the window's time left. It must
	// not keep key once it returns a reply: key is a view of a buffer reused afterwards
	// (rueidis copies it into the command it writes, and keeps no map of keys).
	send func(ctx context.Context, key string, args []string) (used int64, left time.Duration, err error)
	// deadline is the context a sender arriving at now bounds its call with.
	deadline func(now int64) context.Context
	limit    string
	window   string

	mu          sync.Mutex
	calls       map[string]*keyCalls // by key, while a call for it is in flight
	freeCalls   []*keyCalls
	freeBatches []*batch
}

// keepFree bounds the records and batches kept for reuse.
const keepFree = 64

// keyCalls is one key's calls: the one in flight and the batch waiting to follow it.
type keyCalls struct {
	buf []byte
	// key is a view of buf, the map's key and the call's. A record goes back for reuse
	// (and buf is overwritten) only once its last call returned a reply: a call that
	// failed may have left its command queued in the client, which would read the key
	// later, so a record that saw an error is left to the garbage collector.
	key     string
	failed  bool
	running *batch // the call in flight
	waiting *batch // requests that arrived while it was; nil when none
}

// batch is one call to Redis and the requests it counts.
type batch struct {
	cost int64 // requests joined
	// refs is the requests yet to read the outcome, and the next batch's leader while
	// it waits for this one; the batch is reused once it is 0.
	refs     int
	finished bool
	done     sync.Cond // L is the coalescer's mu
	used     int64
	left     time.Duration
	err      error
	args     [3]string // limit, window, cost: the script's ARGV
}

func newCoalescer(limit, window int64, send func(context.Context, string, []string) (int64, time.Duration, error),
	deadline func(now int64) context.Context) *coalescer {
	return &coalescer{
		send: send, deadline: deadline,
		limit: strconv.FormatInt(limit, 10), window: strconv.FormatInt(window, 10),
		calls: map[string]*keyCalls{},
	}
}

// count adds one request to key's window and returns the window's count up to and
// including it, and the window's time left.
func (co *coalescer) count(key []byte) (used int64, left time.Duration, err error) {
	co.mu.Lock()
	kc := co.calls[string(key)]
	if kc == nil {
		kc = co.newCalls(key)
	}
	if b := kc.waiting; b != nil {
		// Join the batch about to be sent (after the call in flight, if any), and wait
		// for its reply.
		b.cost++
		b.refs++
		nth := b.cost
		for !b.finished {
			b.done.Wait()
		}
		used, left, err = b.used-b.cost+nth, b.left, b.err
		co.unref(b)
		co.mu.Unlock()
		return used, left, err
	}
	// Lead a batch: wait for the call in flight if there is one, then yield once, so that
	// the requests the worker already has runnable join too (a worker runs one goroutine
	// at a time: in BenchmarkRedisAccessOneKey this made batches of about 61 requests
	// out of 64 instead of about 20), then send for every request that joined.
	ctx := co.deadline(time.Now().UnixNano())
	b := co.newBatch()
	kc.waiting = b
	if prev := kc.running; prev != nil {
		prev.refs++
		for !prev.finished {
			prev.done.Wait()
		}
		co.unref(prev)
		kc.running = nil
	}
	co.mu.Unlock()
	runtime.Gosched()
	co.mu.Lock()
	kc.running, kc.waiting = b, nil
	co.mu.Unlock()
	return co.run(kc, b, ctx)
}

// run sends b's call, for the requests that joined it, and hands out the reply; the
// caller is b's first request. co.mu is not held.
func (co *coalescer) run(kc *keyCalls, b *batch, ctx context.Context) (used int64, left time.Duration, err error) {
	b.args = [3]string{co.limit, co.window, costText(b.cost)}
	sent := false
	defer func() {
		if !sent {
			// send panicked, and the panic goes on up (the worker answers this request
			// 500): the batch's others get an error and the key's next batch goes ahead,
			// rather than waiting for this one forever.
			co.finish(kc, b, 0, 0, errSendPanicked)
		}
	}()
	used, left, err = co.send(ctx, kc.key, b.args[:])
	sent = true
	return co.finish(kc, b, used, left, err)
}

// errSendPanicked is the error of the requests of a call whose sending panicked.
var errSendPanicked = errors.New("limit-count: counting in Redis panicked")

// finish hands out b's reply and lets the key's next batch go, and returns what the
// batch's first request gets. co.mu is not held.
func (co *coalescer) finish(kc *keyCalls, b *batch, used int64, left time.Duration, err error) (int64, time.Duration, error) {
	co.mu.Lock()
	b.used, b.left, b.err, b.finished = used, left, err, true
	b.done.Broadcast()
	kc.failed = kc.failed || err != nil
	if kc.waiting == nil {
		delete(co.calls, kc.key)
		kc.running = nil
		if !kc.failed && len(co.freeCalls) < keepFree {
			co.freeCalls = append(co.freeCalls, kc)
		}
	}
	used -= b.cost - 1
	co.unref(b)
	co.mu.Unlock()
	return used, left, err
}

// newCalls makes key's record, in the map. co.mu is held.
func (co *coalescer) newCalls(key []byte) *keyCalls {
	var kc *keyCalls
	if n := len(co.freeCalls); n > 0 {
		kc = co.freeCalls[n-1]
		co.freeCalls = co.freeCalls[:n-1]
	} else {
		kc = &keyCalls{}
	}
	kc.buf = append(kc.buf[:0], key...)
	kc.key = bytesconv.String(kc.buf)
	co.calls[kc.key] = kc
	return kc
}

// newBatch returns a batch of one request. co.mu is held.
func (co *coalescer) newBatch() *batch {
	var b *batch
	if n := len(co.freeBatches); n > 0 {
		b = co.freeBatches[n-1]
		co.freeBatches = co.freeBatches[:n-1]
	} else {
		b = &batch{}
		b.done.L = &co.mu
	}
	b.cost, b.refs = 1, 1
	return b
}

// unref lets go of b, which goes back for reuse once nobody reads it. co.mu is held.
func (co *coalescer) unref(b *batch) {
	b.refs--
	if b.refs > 0 {
		return
	}
	if len(co.freeBatches) < keepFree {
		b.finished, b.used, b.left, b.err, b.args = false, 0, 0, nil, [3]string{}
		co.freeBatches = append(co.freeBatches, b)
	}
}

// costTexts are the costs a batch usually has, formatted once.
var costTexts = func() (t [1025]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func costText(n int64) string {
	if n < int64(len(costTexts)) {
		return costTexts[n]
	}
	return strconv.FormatInt(n, 10)
}
