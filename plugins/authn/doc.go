// Package authn is what the authentication plugins (key-auth, basic-auth) share: the
// per-snapshot cache of their consumer index, the walk over a snapshot's consumers that
// builds it, the 401 answer with its WWW-Authenticate challenge and the fall-back to an
// anonymous consumer, and APISIX's realm schema. Each plugin still owns how a request
// presents its credential and how it is checked. A plugin builds an index once per
// config snapshot (Cache.For) and a Rejection once per route; on a failed check its
// Access calls Rejection.Reject, which either answers 401 or lets the request on as the
// route's anonymous consumer. Everything here is safe for concurrent use.
package authn
