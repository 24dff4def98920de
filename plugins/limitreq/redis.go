package limitreq

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"gw/plugins"
	"gw/plugins/limitkey"
	"gw/plugins/redispolicy"
)

// bucketScript is APISIX's leaky bucket (apisix/plugins/limit-req/util.lua), made one
// atomic step so that a limit is exact across gateways and workers: APISIX reads and
// writes the two keys in four commands, so two gateways can both take the last place in
// a bucket. As APISIX's, excess and rate are in thousandths of a request, last in
// milliseconds, and a request over burst is not recorded. The clock is Redis's (TIME),
// so gateways whose clocks disagree still share one bucket. Both keys expire once the
// bucket has drained, when its state says no more than a new key's.
//
// KEYS: excess, last. ARGV: rate and burst in thousandths. Returns {1, excess} when the
// request is taken (its wait is excess/rate seconds), {0, excess} when it is rejected.
const bucketScript = `local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local excess = tonumber(redis.call('GET', KEYS[1]))
local last = tonumber(redis.call('GET', KEYS[2]))
if excess and last then
    excess = math.max(excess - rate * math.abs(now - last) / 1000 + 1000, 0)
    if excess > burst then
        return {0, math.floor(excess)}
    end
else
    excess = 0
end
local ttl = math.ceil((excess + 1000) * 1000 / rate) + 1000
redis.call('SET', KEYS[1], tostring(excess), 'PX', ttl)
redis.call('SET', KEYS[2], now, 'PX', ttl)
return {1, math.floor(excess)}`

var bucket = rueidis.NewLuaScript(bucketScript)

// errFailedToLimit is the answer when Redis fails: 500, as APISIX's limit-req answers
// (it logs "failed to limit req"), unless allow_degradation. The cause goes to the error
// log.
var errFailedToLimit = errors.New("failed to limit req")

// failedWhat begins limit-req's error log lines about Redis.
const failedWhat = "limit-req: failed to limit req"

// redisLimiter is one route's limit-req instance with a redis policy: the buckets live in
// Redis, where every gateway on the same servers and route configuration takes from the
// same bucket. It is immutable and shared by every request of the route.
type redisLimiter struct {
	client *redispolicy.Client
	// prefix is the keys up to the request's key value: "limit_req:" and APISIX's
	// gen_limit_key, "<resource key>:<configuration version>:"; with redis-cluster, "{"
	// follows "limit_req:" (a hash tag, closed after the key value, so that a bucket's two
	// keys share a slot).
	prefix           []byte
	cluster          bool
	key              limitkey.Key
	args             []string // rate and burst in thousandths
	rate             float64  // thousandths of a request per second
	nodelay          bool
	allowDegradation bool
	rejectedCode     int
	rejectedBody     []byte
	logf             func(format string, args ...any)
	sleep            func(time.Duration)
}

var _ plugins.AccessPhase = (*redisLimiter)(nil)

// buildRedis makes a route's redis limiter. It does not connect: the first request does.
func buildRedis(cfg *Config, env *plugins.Env, key limitkey.Key) (*redisLimiter, error) {
	prefix := []byte("limit_req:")
	cluster := cfg.Policy == "redis-cluster"
	if cluster {
		prefix = append(prefix, '{')
	}
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
		cluster:          cluster,
		key:              key,
		args:             []string{fmtThousandths(cfg.Rate), fmtThousandths(cfg.Burst)},
		rate:             cfg.Rate * 1000,
		nodelay:          cfg.NoDelay,
		allowDegradation: cfg.AllowDegradation,
		rejectedCode:     cfg.RejectedCode,
		logf:             logf,
		sleep:            time.Sleep,
	}
	if cfg.RejectedMsg != "" {
		body, err := rejectedBody(cfg.RejectedMsg)
		if err != nil {
			redispolicy.Release(l.client)
			return nil, err
		}
		l.rejectedBody = body
	}
	// The client is shared by every limiter of its servers and closed with the last; a
	// limiter is dropped with the last snapshot that holds it.
	runtime.AddCleanup(l, redispolicy.Release, l.client)
	return l, nil
}

func fmtThousandths(f float64) string { return strconv.FormatFloat(f*1000, 'g', -1, 64) }

// keyScratch holds most keys, prefix and suffix included, on the stack.
const keyScratch = 256

// Access takes the request into its key's bucket in Redis, answering rejected_code when
// the bucket is over burst, and otherwise waiting its turn (excess/rate) unless nodelay.
// Redis failing or slower than redis_timeout answers 500 "failed to limit req", or lets
// the request through with allow_degradation.
func (l *redisLimiter) Access(c *plugins.Ctx) error {
	var scratch [keyScratch]byte
	base := l.key.Append(append(scratch[:0], l.prefix...), c)
	if l.cluster {
		base = append(base, '}')
	}
	n := len(base)
	both := append(append(base, "excess"...), base...)
	both = append(both, "last"...)
	keys := [2]string{string(both[:n+len("excess")]), string(both[n+len("excess"):])}
	taken, excess, err := l.take(keys[:])
	if err != nil {
		l.client.Failed(l.logf, failedWhat, err)
		if l.allowDegradation {
			return nil
		}
		return errFailedToLimit
	}
	if !taken {
		var contentType []byte
		if l.rejectedBody != nil {
			contentType = contentTypeJSON
		}
		c.Respond(l.rejectedCode, contentType, l.rejectedBody)
		return nil
	}
	if wait := time.Duration(float64(excess) / l.rate * float64(time.Second)); wait >= minDelay && !l.nodelay {
		l.sleep(wait)
	}
	return nil
}

// take runs the bucket's script, bounded by redis_timeout.
func (l *redisLimiter) take(keys []string) (taken bool, excess int64, err error) {
	ctx := l.client.Deadline(time.Now().UnixNano())
	res, err := l.client.Exec(ctx, bucket, keys, l.args)
	if err != nil {
		return false, 0, err
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("limit-req: the script returned %d values, want 2", len(res))
	}
	ok, err := res[0].AsInt64()
	if err == nil {
		excess, err = res[1].AsInt64()
	}
	return ok == 1, max(0, min(excess, math.MaxInt64)), err
}
