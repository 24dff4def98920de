package redispolicy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// The Redis client is rueidis: it pipelines the commands of concurrent callers on one
// connection per server by itself (auto-pipelining), so a worker with GOMAXPROCS=1 and
// a thousand connections sends their counts in a few writes and reads per round trip
// instead of a round trip each, and it follows a cluster's slots (MOVED, ASK) and
// reconnects without help. go-redis pipelines only when asked, batch by batch.

// clients is the process's Redis clients: one per distinct server configuration, shared
// by every route and plugin that uses it, made on the first request that needs it and
// closed once no limiter refers to it. Safe for concurrent use.
var clients = clientCache{byKey: map[string]*Client{}}

type clientCache struct {
	mu    sync.Mutex
	byKey map[string]*Client
}

// redisTarget is what a client connects with: the fields of RedisConfig a connection
// depends on, for the redis or the redis-cluster policy.
type redisTarget struct {
	cluster  bool
	addrs    []string
	username string
	password string
	database int
	timeout  time.Duration
	tls      bool
	verify   bool
	name     string // redis_cluster_name
	// idle is redis_keepalive_timeout: the connection closes once unused that long.
	idle time.Duration
}

func targetOf(policy string, r *Config) redisTarget {
	t := redisTarget{username: r.username, password: r.password, timeout: r.TimeoutDuration(),
		idle: time.Duration(r.KeepaliveTimeout) * time.Millisecond}
	if policy == "redis-cluster" {
		t.cluster, t.addrs, t.tls, t.verify, t.name = true, r.ClusterNodes, r.ClusterSSL, r.ClusterSSLVerify, r.ClusterName
	} else {
		t.addrs = []string{net.JoinHostPort(r.host, strconv.Itoa(r.Port))}
		t.database, t.tls, t.verify = int(r.Database), r.SSL, r.SSLVerify
	}
	return t
}

// key identifies the target in the cache; it holds the password, and never leaves the
// process.
func (t *redisTarget) key() string {
	return fmt.Sprintf("%t\x00%s\x00%s\x00%s\x00%d\x00%d\x00%t\x00%t\x00%s\x00%d", t.cluster, strings.Join(t.addrs, ","),
		t.username, t.password, t.database, t.timeout, t.tls, t.verify, t.name, t.idle)
}

// String names the target for the error log, without its credentials.
func (t *redisTarget) String() string {
	if t.cluster {
		return "redis cluster " + strings.Join(t.addrs, ",")
	}
	return "redis " + t.addrs[0]
}

// Acquire returns the client for a redis or redis-cluster policy's servers, counting one
// more user; Release gives it back, and the last Release closes it. It does not connect:
// the first request that needs Redis does (Exec), so that building a snapshot (in the
// master too, for a write's check) never waits for Redis.
func Acquire(policy string, r *Config) *Client {
	t := targetOf(policy, r)
	k := t.key()
	cc := &clients
	cc.mu.Lock()
	defer cc.mu.Unlock()
	rc := cc.byKey[k]
	if rc == nil {
		rc = &Client{target: t, cacheKey: k}
		cc.byKey[k] = rc
	}
	rc.users++
	return rc
}

// Release gives back a client Acquire returned.
func Release(rc *Client) {
	cc := &clients
	cc.mu.Lock()
	rc.users--
	last := rc.users == 0
	if last {
		delete(cc.byKey, rc.cacheKey)
	}
	cc.mu.Unlock()
	if last {
		rc.close()
	}
}

// Client is one Redis configuration's connection in this process. It dials on the
// first request that needs it, outside any lock, and requests that arrive meanwhile wait
// for that dial up to their own deadline; a dial that fails is tried again by the next
// request. Once connected, rueidis reconnects by itself. Safe for concurrent use.
type Client struct {
	target   redisTarget
	cacheKey string
	users    int // guarded by clientCache.mu

	client atomic.Pointer[clientBox]

	mu      sync.Mutex
	dialing chan struct{} // closed when the dial in progress ends; nil when none
	dialErr error         // the last dial's error
	closed  bool

	// lastUse (unix nanos) and inflight tell closeWhenIdle whether the connection is
	// idle.
	lastUse  atomic.Int64
	inflight atomic.Int64

	nextLog    atomic.Int64 // unix nanos before which failures are only counted
	unreported atomic.Uint64

	// deadline is the context requests bound their counts with (Deadline).
	deadline atomic.Pointer[sharedDeadline]
}

// sharedDeadline is a context whose deadline is made, then shared by every request of
// the next tenth of redis_timeout.
type sharedDeadline struct {
	ctx context.Context
	// cancel is never called: requests may hold ctx until it expires, which frees it.
	cancel context.CancelFunc
	at     int64 // unix nanos
}

// Deadline returns a context that expires at most redis_timeout after now and at
// least nine tenths of it after: one context, and one runtime timer, serves every request
// of a tenth of the timeout, rather than one of each per request (4 of a request's 6
// allocations, and the timer heap's lock). Each is left to expire by itself, so at most
// about ten are alive at once.
func (rc *Client) Deadline(now int64) context.Context {
	timeout := int64(rc.target.timeout)
	if d := rc.deadline.Load(); d != nil && d.at <= now+timeout && d.at >= now+timeout-timeout/10 {
		return d.ctx
	}
	at := now + timeout
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, at))
	rc.deadline.Store(&sharedDeadline{ctx: ctx, cancel: cancel, at: at})
	return ctx
}

type clientBox struct{ c rueidis.Client }

var errClientClosed = errors.New("redis client closed")

// get returns the connected client, dialing or waiting for a dial until deadline.
func (rc *Client) get(ctx context.Context) (rueidis.Client, error) {
	if b := rc.client.Load(); b != nil {
		return b.c, nil
	}
	rc.mu.Lock()
	if b := rc.client.Load(); b != nil {
		rc.mu.Unlock()
		return b.c, nil
	}
	if rc.closed {
		rc.mu.Unlock()
		return nil, errClientClosed
	}
	done := rc.dialing
	if done == nil {
		done = make(chan struct{})
		rc.dialing = done
		go rc.dial(done)
	}
	rc.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("connecting to %s: %w", &rc.target, ctx.Err())
	}
	if b := rc.client.Load(); b != nil {
		return b.c, nil
	}
	rc.mu.Lock()
	err := rc.dialErr
	rc.mu.Unlock()
	return nil, err
}

// dial connects, bounded by the target's timeout, and wakes the waiters.
func (rc *Client) dial(done chan struct{}) {
	t := &rc.target
	opt := rueidis.ClientOption{
		InitAddress:  slices.Clone(t.addrs), // rueidis shuffles it in place, and t is shared
		Username:     t.username,
		Password:     t.password,
		SelectDB:     t.database,
		Dialer:       net.Dialer{Timeout: t.timeout},
		DisableCache: true,
		// A response slower than this breaks the connection, and every command queued on
		// it fails, rather than waiting behind it.
		ConnWriteTimeout: max(t.timeout, 100*time.Millisecond),
		ClientName:       "gw",
		// Debian's redis-server 7.0 has no CLIENT SETINFO; skipping it saves a round trip.
		ClientSetInfo:     rueidis.DisableClientSetInfo,
		ForceSingleClient: !t.cluster,
		ShuffleInit:       t.cluster,
		// One connection per server: a worker runs on one processor, and its commands
		// batch only if they share a connection. In benchmark/redis.sh Redis read 12.9
		// commands per read with one, 7.5 with four. -1 says one whatever GOMAXPROCS is;
		// rueidis reads 0 as log2(GOMAXPROCS), which is one only in a worker.
		PipelineMultiplex: -1,
		// The writer waits up to 20 µs (rueidis's suggestion) for more commands while
		// others are in flight: 20.6 commands per read against 12.9, for gw 1.31× local's
		// CPU per request against 1.39× (median of 6 rounds each, noisy).
		MaxFlushDelay: 20 * time.Microsecond,
	}

	if t.tls {
		host, _, _ := net.SplitHostPort(t.addrs[0])
		opt.TLSConfig = &tls.Config{ServerName: host, InsecureSkipVerify: !t.verify, MinVersion: tls.VersionTLS12}
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		err = fmt.Errorf("connecting to %s: %w", t, err)
	}
	rc.mu.Lock()
	if err == nil && rc.closed {
		c.Close()
		err = errClientClosed
	}
	if err == nil {
		b := &clientBox{c}
		rc.lastUse.Store(time.Now().UnixNano())
		rc.client.Store(b)
		go rc.closeWhenIdle(b)
	}
	rc.dialErr, rc.dialing = err, nil
	rc.mu.Unlock()
	close(done)
}

// closeWhenIdle closes b's connections once no request has used them for
// redis_keepalive_timeout (APISIX's pool idle timeout), so that a worker whose routes
// stop counting in Redis holds no connection to it; the next request dials again. It
// returns when b is closed, for idleness or by close. A request that took b just before
// it closed retries once on the new connection (incr).
func (rc *Client) closeWhenIdle(b *clientBox) {
	idle := rc.target.idle
	tick := time.NewTicker(max(idle/4, 100*time.Millisecond))
	defer tick.Stop()
	for range tick.C {
		if rc.client.Load() != b {
			return
		}
		if rc.inflight.Load() != 0 || time.Now().UnixNano()-rc.lastUse.Load() < int64(idle) {
			continue
		}
		rc.mu.Lock()
		closed := rc.client.CompareAndSwap(b, nil)
		rc.mu.Unlock()
		if closed {
			b.c.Close()
		}
		return
	}
}

// Closed reports whether the last user released the client.
func (rc *Client) Closed() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.closed
}

func (rc *Client) close() {
	rc.mu.Lock()
	rc.closed = true
	b := rc.client.Swap(nil)
	rc.mu.Unlock()
	if b != nil {
		b.c.Close()
	}
}

// Failed logs a failure to the error log at most once a second per client, counting the
// others into the next line; what says what failed ("limit-count: failed to limit
// count").
func (rc *Client) Failed(logf func(string, ...any), what string, err error) {
	now := time.Now().UnixNano()
	next := rc.nextLog.Load()
	if now < next || !rc.nextLog.CompareAndSwap(next, now+int64(time.Second)) {
		rc.unreported.Add(1)
		return
	}
	logf("%s with %s: %v (%d more failures in the last second)", what, &rc.target, err,
		rc.unreported.Swap(0))
}

// Exec runs script with keys and args, bounded by ctx, dialing first if need be, and
// returns its reply's array.
func (rc *Client) Exec(ctx context.Context, script *rueidis.Lua, keys, args []string) ([]rueidis.RedisMessage, error) {
	rc.inflight.Add(1)
	defer rc.inflight.Add(-1)
	rc.lastUse.Store(time.Now().UnixNano())
	for attempt := 0; ; attempt++ {
		c, err := rc.get(ctx)
		if err != nil {
			return nil, err
		}
		res, err := script.Exec(ctx, c, keys, args).ToArray()
		// The connection closed for idleness between get and Exec: nothing was sent.
		if errors.Is(err, rueidis.ErrClosing) && attempt == 0 {
			continue
		}
		return res, err
	}
}
