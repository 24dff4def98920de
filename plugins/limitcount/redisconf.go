package limitcount

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"gw/plugins/pluginconf"
	"gw/plugins/redispolicy"
)

// RedisConfig is where the redis and redis-cluster policies keep their counters
// (redispolicy.Config, shared with limit-req). It is part of Config and as immutable.
type RedisConfig = redispolicy.Config

// minSyncInterval is APISIX's: "sync_interval should not be smaller than 0.1".
const minSyncInterval = 0.1

// parseRedisMember reads one of the redis policies' members into c; handled is false for
// a name that is none of them.
func (c *Config) parseRedisMember(m pluginconf.Member) (handled bool, err error) {
	if m.Name == "sync_interval" {
		c.SyncInterval, err = syncInterval(m)
		return true, err
	}
	return c.RedisConfig.ParseMember(m)
}

// syncInterval reads sync_interval in seconds; APISIX's default, -1, turns it off (0).
// Its bounds depend on the policy and time_window, checked once all are read.
func syncInterval(m pluginconf.Member) (float64, error) {
	s := string(m.Value)
	f, err := strconv.ParseFloat(s, 64)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("sync_interval: must be a number of seconds, got %s", m.Show())
	}
	if f == -1 {
		return 0, nil
	}
	if f == 0 {
		// 0 is kept apart from "off" so that the policy check refuses it, as APISIX does.
		return math.SmallestNonzeroFloat64, nil
	}
	return f, nil
}

// finishRedis applies the redis policies' defaults and requirements once every member is
// read. With policy local the redis settings are checked but not kept, as APISIX ignores
// them: they neither change the counters' keys nor the group rule.
func (c *Config) finishRedis() error {
	if err := c.RedisConfig.Finish(c.Policy); err != nil {
		return err
	}
	if c.Policy == "local" {
		c.SyncInterval = 0
		return nil
	}
	if c.SyncInterval != 0 {
		if c.SyncInterval < minSyncInterval {
			return fmt.Errorf("sync_interval: should not be smaller than %g, got %s", minSyncInterval, showSeconds(c.SyncInterval))
		}
		if c.SyncInterval >= float64(c.TimeWindow) {
			return fmt.Errorf("sync_interval: should be smaller than time_window, got %s with time_window %d",
				showSeconds(c.SyncInterval), c.TimeWindow)
		}
	}
	return nil
}

func showSeconds(f float64) string {
	if f == math.SmallestNonzeroFloat64 {
		return "0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// SyncDuration is SyncInterval as a duration; 0 when counts go to Redis on every
// request.
func (c *Config) SyncDuration() time.Duration {
	return time.Duration(c.SyncInterval * float64(time.Second))
}

// redisSettings are the redis settings, for canonical and difference: none with policy
// local, so that local counters keep their keys.
func (c *Config) redisSettings() []setting {
	var out []setting
	for _, s := range c.RedisConfig.Settings(c.Policy) {
		out = append(out, setting{s.Name, s.Value})
	}
	if out != nil {
		out = append(out, setting{"sync_interval", strconv.FormatFloat(c.SyncInterval, 'g', -1, 64)})
	}
	return out
}
