package limitcount

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"gw/plugins/redispolicy"
)

// commitScript is APISIX's (apisix/plugins/limit-count/util.lua): the first request of
// a window SETs the key to its cost with the window as its expiry, so the window is
// anchored at the key's first request everywhere; later ones INCRBY. It returns the
// count so far and the window's time left in milliseconds. Rejected requests are counted
// too, as in APISIX; they change nothing a client sees.
const commitScript = `assert(tonumber(ARGV[3]) >= 0, "cost must be at least 0")
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
    redis.call('set', KEYS[1], ARGV[3], 'EX', ARGV[2])
    return {ARGV[3], ARGV[2] * 1000}
end
return {redis.call('incrby', KEYS[1], ARGV[3]), ttl}`

var commit = rueidis.NewLuaScript(commitScript)

// incr adds cost to key's window (args: limit, window seconds, cost) on rc and returns
// the window's count and its time left.
func incr(ctx context.Context, rc *redispolicy.Client, key string, args []string) (used int64, left time.Duration, err error) {
	keys := [1]string{key}
	res, err := rc.Exec(ctx, commit, keys[:], args)
	if err != nil {
		return 0, 0, err
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("limit-count: the script returned %d values, want 2", len(res))
	}
	if used, err = res[0].AsInt64(); err == nil {
		var ms int64
		ms, err = res[1].AsInt64()
		left = time.Duration(ms) * time.Millisecond
	}
	return used, left, err
}

// failedWhat begins limit-count's error log lines about Redis.
const failedWhat = "limit-count: failed to limit count"
