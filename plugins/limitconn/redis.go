package limitconn

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"gw/plugins"
	"gw/plugins/limitkey"
	"gw/plugins/redispolicy"
)

// incomingScript is APISIX's (apisix/plugins/limit-conn/util.lua): a key's requests in
// flight are the members of a sorted set, each scored with when it stops counting (now +
// key_ttl), so that what a dead gateway held expires. A request drops the expired, and
// joins unless conn + burst are in flight. The clock is Redis's (TIME), the same for
// every gateway. KEYS: the set. ARGV: conn + burst, key_ttl, the request's id. Returns
// {1, in flight with it} or {0, in flight}.
const incomingScript = `local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
    return {0, count}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
redis.call('EXPIRE', KEYS[1], ttl)
return {1, count + 1}`

var incoming = rueidis.NewLuaScript(incomingScript)

// leavingScript removes a request that has ended (APISIX's leaving: ZREM).
const leavingScript = `return redis.call('ZREM', KEYS[1], ARGV[1])`

var leaving = rueidis.NewLuaScript(leavingScript)

// errFailedToLimit is the answer when Redis fails: 500, as APISIX's limit-conn answers
// (it logs "failed to limit conn"), unless allow_degradation.
var errFailedToLimit = errors.New("failed to limit conn")

const failedWhat = "limit-conn: failed to limit conn"

// requestIDs names this process's requests in the sets: a random prefix (a restarted
// worker's pid may be reused) and a counter.
var (
	requestPrefix = func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + ":" + strconv.Itoa(os.Getpid()) + ":"
	}()
	requestSeq atomic.Int64
)

// redisLimiter is one route's limit-conn instance with a redis policy: a key's requests
// in flight are counted in Redis, across every gateway on those servers. It is immutable
// but for the unit delay, and shared by every request of the route.
type redisLimiter struct {
	client           *redispolicy.Client
	prefix           []byte // "limit_conn:<resource key>:<version>:"
	key              limitkey.Key
	args             [2]string // conn + burst, key_ttl
	max              int64
	onlyDefaultDelay bool
	rejectedCode     int
	rejectedBody     []byte
	allowDegradation bool
	unitDelay        atomic.Int64 // nanoseconds
	logf             func(string, ...any)
	sleep            func(time.Duration)
}

var (
	_ plugins.AccessPhase = (*redisLimiter)(nil)
	_ plugins.LogPhase    = (*redisLimiter)(nil)
)

func buildRedis(cfg *Config, env *plugins.Env, key limitkey.Key) (*redisLimiter, error) {
	prefix := []byte("limit_conn:")
	if env.GlobalRuleID != "" {
		prefix = append(prefix, "/apisix/global_rules/"+env.GlobalRuleID...)
	} else if env.Route != nil {
		prefix = append(prefix, "/apisix/routes/"+env.Route.ID...)
	}
	prefix = append(prefix, ':')
	prefix = strconv.AppendUint(prefix, uint64(cfg.redisVersion()), 10)
	prefix = append(prefix, ':')
	logf := func(string, ...any) {}
	if env.Shared != nil && env.Shared.Logf != nil {
		logf = env.Shared.Logf
	}
	l := &redisLimiter{
		client:           redispolicy.Acquire(cfg.Policy, &cfg.Redis),
		prefix:           prefix,
		key:              key,
		args:             [2]string{strconv.FormatInt(cfg.Conn+cfg.Burst, 10), strconv.FormatInt(cfg.KeyTTL, 10)},
		max:              cfg.Conn,
		onlyDefaultDelay: cfg.OnlyUseDefaultDelay,
		rejectedCode:     cfg.RejectedCode,
		allowDegradation: cfg.AllowDegradation,
		logf:             logf,
		sleep:            time.Sleep,
	}
	l.unitDelay.Store(int64(cfg.DefaultConnDelay * float64(time.Second)))
	if cfg.RejectedMsg != "" {
		body, err := json.Marshal(struct {
			ErrorMsg string `json:"error_msg"`
		}{cfg.RejectedMsg})
		if err != nil {
			redispolicy.Release(l.client)
			return nil, fmt.Errorf("encoding rejected_msg: %w", err)
		}
		l.rejectedBody = body
	}
	runtime.AddCleanup(l, redispolicy.Release, l.client)
	return l, nil
}

// setKey is the request's sorted set.
func (l *redisLimiter) setKey(c *plugins.Ctx) string {
	var scratch [256]byte
	return string(l.key.Append(append(scratch[:0], l.prefix...), c))
}

func memberOf(seq int64) string { return requestPrefix + strconv.FormatInt(seq, 10) }

// Access takes a place among the key's requests in flight in Redis: past conn + burst the
// request is answered rejected_code; past conn it waits unit delay × floor((in flight -
// 1) / conn), as APISIX. Redis failing answers 500 "failed to limit conn", or lets the
// request through (uncounted) with allow_degradation.
func (l *redisLimiter) Access(c *plugins.Ctx) error {
	seq := requestSeq.Add(1)
	set := l.setKey(c)
	ctx := l.client.Deadline(time.Now().UnixNano())
	res, err := l.client.Exec(ctx, incoming, []string{set}, []string{l.args[0], l.args[1], memberOf(seq)})
	var taken, inFlight int64
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("limit-conn: the script returned %d values, want 2", len(res))
	}
	if err == nil {
		if taken, err = res[0].AsInt64(); err == nil {
			inFlight, err = res[1].AsInt64()
		}
	}
	if err != nil {
		l.client.Failed(l.logf, failedWhat, err)
		if l.allowDegradation {
			return nil
		}
		return errFailedToLimit
	}
	if taken != 1 {
		var contentType []byte
		if l.rejectedBody != nil {
			contentType = contentTypeJSON
		}
		c.Respond(l.rejectedCode, contentType, l.rejectedBody)
		return nil
	}
	var delay time.Duration
	if inFlight > l.max {
		delay = time.Duration(l.unitDelay.Load()) * time.Duration((inFlight-1)/l.max)
	}
	// The hold carries the request's id; its key is read again at the log phase.
	if !c.AddHold(plugins.Hold{Owner: l, Nanos: seq}) {
		l.leave(set, seq) // more holds than a request keeps: give the place back now
	}
	if delay >= minDelay {
		l.sleep(delay)
	}
	return nil
}

// Log gives the request's place back, however the request ended. If Redis fails here the
// place is held until key_ttl has passed, and the error log says so. Unless
// only_use_default_delay, the request's latency moves the unit delay halfway to it: the
// upstream's time when proxied, else the request's time, its own delay included (the
// hold carries the request's id where the local limiter keeps its delay).
func (l *redisLimiter) Log(c *plugins.Ctx) {
	h, ok := c.TakeHold(l)
	if !ok {
		return
	}
	l.leave(l.setKey(c), h.Nanos)
	if l.onlyDefaultDelay {
		return
	}
	latency := c.UpstreamNanos
	if latency < 0 {
		latency = c.AnsweredAt() - c.StartNanos
	}
	if latency >= 0 {
		l.unitDelay.Store((latency + l.unitDelay.Load()) / 2)
	}
}

func (l *redisLimiter) leave(set string, seq int64) {
	ctx := l.client.Deadline(time.Now().UnixNano())
	if _, err := l.client.Exec(ctx, leaving, []string{set}, []string{memberOf(seq)}); err != nil {
		l.client.Failed(l.logf, "limit-conn: failed to give back a request's place (held until key_ttl)", err)
	}
}
