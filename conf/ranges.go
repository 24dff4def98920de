package conf

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The ranges of the numbers in Admin API objects that APISIX's schema leaves open at one
// end, or open where the Go code behind the field could not hold every value. A value
// inside its range works as written; every reader here refuses the rest with the range.
// Fields whose whole int64 range works (route and node priorities, compared only;
// retries, cut to the nodes there are; keepalive_pool.requests, a counter compared;
// checks.active.concurrency, a channel of empty structs; create_time and update_time)
// keep APISIX's schema alone.
const (
	// MaxSeconds bounds every duration of an object (timeouts, intervals, idle times): a
	// year, far beyond any sane setting and far inside time.Duration's 292 years, so that
	// neither the conversion to nanoseconds nor a deadline of now plus it can overflow.
	// APISIX has no maximum; 1e300 seconds used to become a negative duration here, so
	// every request timed out at once.
	MaxSeconds = 365 * 24 * 60 * 60
	// MinSeconds is the shortest duration above 0: a millisecond, the unit nginx (so
	// APISIX) counts its timeouts in. Shorter values are 0 ms there, and far enough
	// below it they round to a 0 time.Duration here, which the proxy and the health
	// checker take as no deadline at all: the opposite of what was asked.
	MinSeconds = 0.001
	// MaxNodeWeight bounds a node's weight; APISIX has no maximum. The balancers add
	// weights (smooth round robin), multiply them by requests in flight (least_conn) and
	// by ring points (chash), and with weights up to a million every such sum and product
	// stays far inside an int for any number of nodes a body can carry. A million is also
	// the Kubernetes Gateway API's maximum backend weight: shares to six digits.
	MaxNodeWeight = 1_000_000
	// maxKeepaliveSize bounds keepalive_pool.size, the idle connections a worker keeps per
	// node: each was some client's request in flight, so no worker ever has more than
	// worker_connections' ceiling of them to keep.
	maxKeepaliveSize = maxConnections
)

// intIn makes a reader for an integer from least to most. A number too large for an
// int64 is out of the range too, and is told so instead of "integer out of range".
func intIn(least, most int) func(json.RawMessage) (int, error) {
	return func(raw json.RawMessage) (int, error) {
		n, err := asInteger(raw)
		if err != nil && !isIntegralNumber(raw) {
			return 0, err // not a number, or a fraction
		}
		if err != nil || n < int64(least) || n > int64(most) {
			return 0, fmt.Errorf("must be %d-%d, got %s", least, most, shownNumber(raw))
		}
		return int(n), nil
	}
}

// readWeight reads a node's weight: 0 (never picked while another node is) to
// MaxNodeWeight.
var readWeight = intIn(0, MaxNodeWeight)

// readIntervalSeconds reads a whole number of seconds, 1 to MaxSeconds.
var readIntervalSeconds = intIn(1, MaxSeconds)

// readSeconds reads a duration in seconds from MinSeconds to MaxSeconds, for the fields
// APISIX wants above 0 (timeouts).
func readSeconds(raw json.RawMessage) (float64, error) {
	f, err := asNumber(raw)
	if err != nil && jsonKind(raw) != "number" {
		return 0, err
	}
	if err != nil || !(f >= MinSeconds && f <= MaxSeconds) {
		return 0, fmt.Errorf("must be %g-%d seconds, got %s", MinSeconds, MaxSeconds, shownNumber(raw))
	}
	return f, nil
}

// readSecondsOrZero reads a duration in seconds that may also be 0, for the fields APISIX
// wants at least 0 (idle_timeout's 0 keeps no idle connection, retry_timeout's 0 sets no
// deadline).
func readSecondsOrZero(raw json.RawMessage) (float64, error) {
	f, err := asNumber(raw)
	if err != nil && jsonKind(raw) != "number" {
		return 0, err
	}
	if err != nil || !(f == 0 || f >= MinSeconds && f <= MaxSeconds) {
		return 0, fmt.Errorf("must be 0 or %g-%d seconds, got %s", MinSeconds, MaxSeconds, shownNumber(raw))
	}
	return f, nil
}

// DurationOf converts a duration in seconds, as the readers here accept it, to a
// time.Duration rounded to the nanosecond. A value outside MinSeconds-MaxSeconds (NaN
// too), which only an object that bypassed validation can hold, gives the nearest bound
// and ok false: never a negative or 0 duration, which would mean no deadline at all.
func DurationOf(seconds float64) (d time.Duration, ok bool) {
	switch {
	case seconds >= MinSeconds && seconds <= MaxSeconds:
		return time.Duration(math.Round(seconds * float64(time.Second))), true
	case seconds > MaxSeconds:
		return MaxSeconds * time.Second, false
	}
	return time.Duration(MinSeconds * float64(time.Second)), false
}

// isIntegralNumber reports whether raw is a JSON number without a fractional part, however
// large (1e400 included).
func isIntegralNumber(raw json.RawMessage) bool {
	if jsonKind(raw) != "number" {
		return false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err != nil || f == math.Trunc(f) // the only error left for a JSON number is ±Inf
}

// shownNumber is a number as written, cut short as describeJSON cuts it.
func shownNumber(raw json.RawMessage) string {
	return strings.TrimPrefix(describeJSON(raw), "number ")
}
