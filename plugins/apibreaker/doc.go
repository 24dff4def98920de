// Package apibreaker is APISIX's api-breaker plugin: a circuit breaker per route and
// request host and path. Upstream answers with an unhealthy status count up; every
// unhealthy.failures of them open the breaker for 2^(count/failures) seconds, at most
// max_breaker_sec, during which the gateway answers break_response_code itself;
// healthy.successes healthy answers in a row close it. The state of each breaker is one
// word in a keyed table in shared memory (shm.KeyedTable), changed with one
// compare-and-swap, so every worker of a route sees one breaker.
package apibreaker
