// Package authn is what the authentication plugins (key-auth, basic-auth) share: the
// walk over a snapshot's consumers that builds their per-snapshot index (which each
// plugin builds in its plugins.SnapshotBuilder, once per snapshot, shared by every
// route), the 401 answer with its WWW-Authenticate challenge and the fall-back to an
// anonymous consumer, and APISIX's realm schema. Each plugin still owns how a request
// presents its credential and how it is checked. A plugin builds a Rejection once per
// route; on a failed check its Access calls Rejection.Reject, which either answers 401 or
// lets the request on as the route's anonymous consumer. Everything here is safe for
// concurrent use.
package authn
