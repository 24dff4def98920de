// Package basicauth is APISIX's basic-auth plugin (priority 2520): a request names its
// consumer with HTTP Basic credentials (RFC 7617). Consumers hold a username and password
// ({"username": "...", "password": "..."} under a consumer's plugins); a route only says
// whether to hide the Authorization header from the upstream (Parse). Build indexes every
// consumer's basic-auth username once per config snapshot, shared by all the snapshot's
// routes, keeping a SHA-256 digest of each password so that checking one compares
// fixed-length digests in constant time. A request costs one base64 decode into a stack
// buffer, one hash and one map lookup, and allocates nothing. Failures answer 401 with
// APISIX's messages ("Missing authorization in request", "Invalid authorization in
// request", "Invalid user authorization") and a `Basic realm="basic"` challenge; an
// accepted request carries the consumer's username in plugins.Ctx.Consumer.
package basicauth
