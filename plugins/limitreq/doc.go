// Package limitreq is APISIX's limit-req plugin: a leaky bucket per key, nginx's
// limit_req, shared exactly by every worker. A key's bucket is one number in a keyed
// table in shared memory (shm.KeyedTable): the time at which the bucket would be empty,
// which each request moves on by one interval (1/rate) with one compare-and-swap.
// Requests past the rate but within burst are delayed until their turn (excess/rate, as
// nginx) unless nodelay; requests past burst are answered rejected_code.
package limitreq
