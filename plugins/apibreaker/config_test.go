package apibreaker

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	accept := []struct {
		raw  string
		want func(*Config) bool
	}{
		// t/plugin/api-breaker.t TEST 2 to 4: the defaults.
		{`{"break_response_code": 502}`, func(c *Config) bool {
			return c.BreakResponseCode == 502 && c.MaxBreakerSec == 300 && c.Unhealthy.Failures == 3 && len(c.Unhealthy.HTTPStatuses) == 1 &&
				c.Unhealthy.HTTPStatuses[0] == 500 && c.Healthy.Successes == 3 && c.Healthy.HTTPStatuses[0] == 200 && c.BreakResponseBody == nil
		}},
		{`{"break_response_code": 502, "healthy": {"successes": 5}}`, func(c *Config) bool {
			return c.Healthy.Successes == 5 && c.Healthy.HTTPStatuses[0] == 200 && c.Unhealthy.Failures == 3
		}},
		{`{"break_response_code": 502, "unhealthy": {"failures": 1}}`, func(c *Config) bool {
			return c.Unhealthy.Failures == 1 && c.Unhealthy.HTTPStatuses[0] == 500
		}},
		// TEST 9 and 13.
		{test9, func(c *Config) bool {
			return c.BreakResponseCode == 599 && len(c.Unhealthy.HTTPStatuses) == 2 && len(c.Healthy.HTTPStatuses) == 2
		}},
		{`{"break_response_code": 502, "break_response_body": "", "break_response_headers": [{"key": "X-A", "value": "$remote_addr-$uri"}],
			"max_breaker_sec": 8388608, "unhealthy": {"failures": 2621}, "healthy": {"successes": 65535}, "disable": true, "_meta": {}}`,
			func(c *Config) bool {
				return c.BreakResponseBody != nil && *c.BreakResponseBody == "" && c.BreakResponseHeaders[0].Key == "X-A" && c.Disable &&
					c.MaxBreakerSec == 8388608
			}},
	}
	for _, tt := range accept {
		c, err := Parse([]byte(tt.raw))
		if err != nil {
			t.Errorf("%s: %v", tt.raw, err)
			continue
		}
		if !tt.want(c) {
			t.Errorf("%s: got %+v", tt.raw, *c)
		}
	}
	reject := []struct{ raw, want string }{
		{`{}`, "break_response_code: is required"},
		// TEST 5: bad break_response_code; TEST 6: bad max_breaker_sec.
		{`{"break_response_code": 199}`, "break_response_code: must be an integer from 200 to 599, got 199"},
		{`{"break_response_code": 502, "max_breaker_sec": -1}`, "max_breaker_sec: must be an integer from 3 to 8388608, got -1"},
		{`{"break_response_code": 502, "max_breaker_sec": 2}`, "max_breaker_sec: "},
		// TEST 7: bad unhealthy.http_statuses.
		{`{"break_response_code": 502, "unhealthy": {"http_statuses": [500, 600]}}`, "unhealthy.http_statuses[1]: must be an integer from 500 to 599, got 600"},
		{`{"break_response_code": 502, "unhealthy": {"http_statuses": [499]}}`, "unhealthy.http_statuses[0]: "},
		{`{"break_response_code": 502, "unhealthy": {"http_statuses": []}}`, "unhealthy.http_statuses: must hold at least one status"},
		// TEST 8: same http_statuses in healthy.
		{`{"break_response_code": 502, "healthy": {"http_statuses": [200, 200]}}`, "healthy.http_statuses[1]: 200 is listed twice"},
		{`{"break_response_code": 502, "healthy": {"http_statuses": [500]}}`, "healthy.http_statuses[0]: must be an integer from 200 to 499"},
		{`{"break_response_code": 502, "healthy": {"http_statuses": 200}}`, "healthy.http_statuses: must be an array"},
		{`{"break_response_code": 502, "unhealthy": {"failures": 0}}`, "unhealthy.failures: "},
		{`{"break_response_code": 502, "unhealthy": {"failures": 2622}}`, "unhealthy.failures: must be an integer from 1 to 2621"},
		{`{"break_response_code": 502, "healthy": {"successes": 0}}`, "healthy.successes: "},
		{`{"break_response_code": 502, "healthy": {"successes": 1, "x": 1}}`, "healthy.x: unknown field"},
		{`{"break_response_code": 502, "unhealthy": 3}`, "unhealthy: must be an object"},
		// TEST 20: reject invalid schema (a header without key and value).
		{`{"break_response_code": 200, "break_response_headers": [{"content-type": "application/json"}]}`,
			"break_response_headers[0].content-type: unknown field"},
		{`{"break_response_code": 200, "break_response_headers": [{"key": "X-A"}]}`, "break_response_headers[0]: needs both key and value"},
		{`{"break_response_code": 200, "break_response_headers": [{"key": "", "value": "v"}]}`, "break_response_headers[0].key: must not be empty"},
		{`{"break_response_code": 200, "break_response_headers": [{"key": "X", "value": "$no_such_var"}]}`, "break_response_headers[0].value: "},
		{`{"break_response_code": 200, "break_response_headers": {"key": "X", "value": "v"}}`, "break_response_headers: must be an array"},
		{`{"break_response_code": 200, "break_response_body": 1}`, "break_response_body: must be a string"},
		{`{"break_response_code": 200, "break_response_msg": "x"}`, "break_response_msg: unknown field"},
		{`{"break_response_code": 200, "disable": "yes"}`, "disable: "},
	}
	for _, tt := range reject {
		_, err := Parse([]byte(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
}
