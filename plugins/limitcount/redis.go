package limitcount

import (
	"context"
	"errors"
	"hash/crc32"
	"runtime"
	"strconv"
	"time"

	"gw/plugins"
	"gw/plugins/redispolicy"
)

// redisKeyPrefix is APISIX 3's: "plugin-" .. plugin name, then its counter format's
// version (KEY_VERSION, init.lua), before the limit key.
const redisKeyPrefix = "plugin-limit-count:v1:"

// errFailedToLimit is APISIX's answer when the counter store fails: 500
// {"error_msg":"failed to limit count"}. The cause goes to the error log.
var errFailedToLimit = errors.New("failed to limit count")

// redisLimiter is one route's limit-count instance with a redis policy. The counters
// live in Redis, where every gateway using the same server and route configuration
// counts against the same key, so a limit holds across gateways exactly; with
// sync_interval they are counted in the worker and reconciled with Redis every interval
// (syncer). It is immutable and shared by every request of the route.
type redisLimiter struct {
	client *redispolicy.Client
	// prefix is the key up to the request's key value: redisKeyPrefix, then APISIX's
	// gen_limit_key, "<group>:" or "<resource key>:<configuration version>:".
	prefix []byte
	text   textKey
	count  int64
	// window is time_window, formatted for the script's ARGV.
	window string
	// counts joins concurrent requests for a key into one call (nil with sync_interval).
	counts  *coalescer
	timeout time.Duration
	sync    *syncer // nil without sync_interval

	showHeaders      bool
	limitValue       []byte
	rejectedCode     int
	rejectedBody     []byte
	allowDegradation bool
	logf             func(format string, args ...any)
}

var _ plugins.AccessPhase = (*redisLimiter)(nil)

// buildRedis makes a route's redis limiter. It does not connect: the first request does,
// so that building a snapshot (in the master too, for a write's check) never waits for
// Redis.
func buildRedis(cfg *Config, env *plugins.Env, base *limiter) (*redisLimiter, error) {
	text, err := newTextKey(cfg)
	if err != nil {
		return nil, err
	}
	prefix := []byte(redisKeyPrefix)
	switch {
	case cfg.Group != "":
		prefix = append(prefix, cfg.Group...)
	default:
		// APISIX's parent.resource_key and plugin.conf_version: the object's etcd key
		// and a CRC-32 of the configuration. gw's CRC is of its own canonical form, the
		// same on every gateway, so every node counts a route's requests together (the
		// bug of APISIX #6760 was a per-node part in this key).
		if env.GlobalRuleID != "" {
			prefix = append(prefix, "/apisix/global_rules/"+env.GlobalRuleID...)
		} else {
			prefix = append(prefix, "/apisix/routes/"+routeID(env)...)
		}
		prefix = append(prefix, ':')
		prefix = strconv.AppendUint(prefix, uint64(crc32.ChecksumIEEE([]byte(cfg.canonical()))), 10)
	}
	prefix = append(prefix, ':')
	l := &redisLimiter{
		client:           redispolicy.Acquire(cfg.Policy, &cfg.RedisConfig),
		prefix:           prefix,
		text:             text,
		count:            cfg.Count,
		window:           strconv.FormatInt(cfg.TimeWindow, 10),
		timeout:          cfg.TimeoutDuration(),
		showHeaders:      base.showHeaders,
		limitValue:       base.limitValue,
		rejectedCode:     base.rejectedCode,
		rejectedBody:     base.rejectedBody,
		allowDegradation: cfg.AllowDegradation,
		logf:             base.logf,
	}
	if d := cfg.SyncDuration(); d > 0 {
		counts, windows, err := openSyncTables(env.Shared)
		if err != nil {
			redispolicy.Release(l.client)
			return nil, err
		}
		l.sync = newSyncer(l, counts, windows, d)
	} else {
		rc := l.client
		l.counts = newCoalescer(cfg.Count, cfg.TimeWindow, func(ctx context.Context, key string, args []string) (int64, time.Duration, error) {
			return incr(ctx, rc, key, args)
		}, rc.Deadline)
	}
	// The client is shared by every limiter of its configuration and closed with the
	// last; a limiter is dropped with the last snapshot that holds it.
	runtime.AddCleanup(l, release, cleanupOf{l.client, l.sync})
	return l, nil
}

type cleanupOf struct {
	client *redispolicy.Client
	sync   *syncer
}

func release(c cleanupOf) {
	if c.sync != nil {
		c.sync.stop()
	}
	redispolicy.Release(c.client)
}

// keyScratchRedis holds most keys, prefix included, on the stack.
const keyScratchRedis = 256

// Access counts the request in Redis (or in the worker with sync_interval) and answers
// it with rejected_code once the window's count is spent. Redis failing or slower than
// redis_timeout answers 500 "failed to limit count", or lets the request through with
// allow_degradation.
func (l *redisLimiter) Access(c *plugins.Ctx) error {
	var scratch [keyScratchRedis]byte
	key := l.text.append(append(scratch[:0], l.prefix...), c)
	var (
		remaining int64
		left      time.Duration
		err       error
	)
	if l.sync != nil {
		remaining, left, err = l.sync.incoming(key)
	} else {
		var used int64
		used, left, err = l.counts.count(key)
		remaining = l.count - used
	}
	if err != nil {
		l.client.Failed(l.logf, failedWhat, err)
		if l.allowDegradation {
			return nil
		}
		return errFailedToLimit
	}
	if remaining < 0 {
		l.headers(c, 0, left)
		l.reject(c)
		return nil
	}
	l.headers(c, remaining, left)
	return nil
}

// headers queues the X-RateLimit-* headers, Reset in whole seconds rounded up as with
// the local policy.
func (l *redisLimiter) headers(c *plugins.Ctx, remaining int64, left time.Duration) {
	if !l.showHeaders {
		return
	}
	var buf [20]byte
	c.AddResponseHeader(headerLimit, l.limitValue)
	c.AddResponseHeader(headerRemaining, strconv.AppendInt(buf[:0], remaining, 10))
	reset := max(0, (left+time.Second-1)/time.Second)
	c.AddResponseHeader(headerReset, strconv.AppendInt(buf[:0], int64(reset), 10))
}

func (l *redisLimiter) reject(c *plugins.Ctx) {
	var contentType []byte
	if l.rejectedBody != nil {
		contentType = contentTypeJSON
	}
	c.Respond(l.rejectedCode, contentType, l.rejectedBody)
}
