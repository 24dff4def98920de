package batch

import (
	"fmt"
	"time"

	"gw/plugins/pluginconf"
)

// Config is the batch processor's part of a logger's configuration, APISIX's
// batch-processor schema with its defaults.
type Config struct {
	// Name is "name", the processor's name in log lines ("log buffer" by default).
	Name            string
	BatchMaxSize    int
	InactiveTimeout time.Duration
	BufferDuration  time.Duration
	MaxRetryCount   int
	RetryDelay      time.Duration
}

// Defaults is APISIX's defaults (batch_max_size 1000, inactive_timeout 5 s,
// buffer_duration 60 s, max_retry_count 0, retry_delay 1 s).
func Defaults() Config {
	return Config{Name: "log buffer", BatchMaxSize: 1000, InactiveTimeout: 5 * time.Second,
		BufferDuration: 60 * time.Second, RetryDelay: time.Second}
}

// Fields are the members Take reads, for the loggers' "unknown field" messages.
const Fields = "batch_max_size, buffer_duration, inactive_timeout, max_retry_count, name, retry_delay"

// The ranges: APISIX's minimums, and maximums a processor can hold (a day of waiting, a
// million entries in a batch) so that a number accepted is one that works.
const (
	maxBatchSize = 1_000_000
	maxSeconds   = 86400
	maxRetries   = 1000
)

// Take reads m into c when it is one of the processor's members and reports whether it
// was; err names the member and the value.
func (c *Config) Take(m pluginconf.Member) (taken bool, err error) {
	var n int64
	switch m.Name {
	case "name":
		c.Name, err = m.NonEmptyString()
	case "batch_max_size":
		n, err = m.IntIn(1, maxBatchSize)
		c.BatchMaxSize = int(n)
	case "inactive_timeout":
		n, err = m.IntIn(1, maxSeconds)
		c.InactiveTimeout = time.Duration(n) * time.Second
	case "buffer_duration":
		n, err = m.IntIn(1, maxSeconds)
		c.BufferDuration = time.Duration(n) * time.Second
	case "max_retry_count":
		n, err = m.IntIn(0, maxRetries)
		c.MaxRetryCount = int(n)
	case "retry_delay":
		n, err = m.IntIn(0, maxSeconds)
		c.RetryDelay = time.Duration(n) * time.Second
	default:
		return false, nil
	}
	return true, err
}

// String is the configuration as a log line names it.
func (c Config) String() string {
	return fmt.Sprintf("%s (batch_max_size %d)", c.Name, c.BatchMaxSize)
}
