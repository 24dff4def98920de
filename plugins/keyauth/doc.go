// Package keyauth is APISIX's key-auth plugin (priority 2500): a request names its
// consumer by an API key, sent in a header (apikey by default) or, failing that, a query
// argument. Consumers hold the keys ({"key": "..."} under a consumer's plugins); a route
// holds where to look (Parse). Build indexes every consumer's key once per config
// snapshot, shared by all the snapshot's routes, so a request costs one map lookup and
// allocates nothing. A request without a key is answered 401 "Missing API key in
// request", one with a key no consumer has 401 "Invalid API key in request", both with
// APISIX's WWW-Authenticate challenge; an accepted request carries the consumer's
// username in plugins.Ctx.Consumer for limit-count's key and prometheus's label.
package keyauth
