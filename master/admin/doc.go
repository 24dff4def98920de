// Package admin serves the APISIX-compatible Admin API (v3) for routes, upstreams,
// services and consumers on top of master/store. A consumer's id is its username, taken
// from the path or the body (which must agree); POST and PATCH are refused for it as in
// APISIX, and no two consumers may share a key-auth key or a basic-auth username.
//
// The model: a request passes the peer allow-list (TCP listener only; Internal skips it
// for the master's private socket), then the key check, then reaches one resource from a
// table (kind, APISIX singular, validator, the fields that reference other kinds). Every
// write runs under one mutex from validation to publication: the body is decoded as JSON
// whatever its Content-Type, the server sets "id", "create_time" and "update_time", the
// whole resulting object is validated (conf decoders, plugin validators, references to
// other objects) before anything is stored, then the store makes it durable, and finally
// a fresh snapshot is published to every worker. A 2xx therefore means every live worker
// already serves the change (read-your-writes); a publication failure answers 503 but
// keeps the durable write, and the next successful write publishes it again. Reads never
// take the mutex. Responses, including errors, use APISIX's bodies and status codes so
// APISIX users' scripts keep working.
//
// Guard rails: keys are compared as SHA-256 digests in constant time; a refused key is
// logged with the peer and the key's name (never the token); bodies over 1.5 MiB get 413;
// every write request, refused ones included, becomes one JSON line in the audit log
// (time, key name, peer, method, resource, status). Export and Import move the whole
// store as one JSON backup; Import applies the backup to a scratch copy of the store,
// validates the result as the API validates a write, and only then stores everything in
// one change, so a bad object changes nothing.
package admin
