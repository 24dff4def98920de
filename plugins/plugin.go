package plugins

import (
	"encoding/json"

	"gw/conf"
)

// Plugin is one plugin as the host sees it. A plugin package registers one value of its
// own type in init() (Register); the host knows it by this interface and by the optional
// ones below, found by type assertion, and never by its package. The order of a
// plugin's life, per config snapshot: Validate (the Admin API, at every write), then in
// every worker BuildSnapshot once (SnapshotBuilder), Build once per route, and the
// instances' phases per request.
type Plugin interface {
	// Name is the key under a route's "plugins" object, e.g. "limit-count".
	Name() string
	// Priority orders the chain as in APISIX: higher runs first.
	Priority() int
	// Validate checks one route configuration strictly (unknown fields, types, ranges)
	// and returns an error that names the offending field. It must be pure and fast.
	Validate(raw json.RawMessage) error
	// Build makes the plugin's instance for one route from a configuration Validate has
	// accepted. Workers call it once per config snapshot per route, never per request.
	// The instance implements AccessPhase, LogPhase or both, and is shared by every
	// request of the route, concurrently. A nil instance means the configuration turns
	// the plugin off on this route (disable: true).
	Build(raw json.RawMessage, env *Env) (any, error)
}

// AccessPhase runs before the request is proxied, highest priority first. To answer the
// request itself (a 401, a 429) a plugin calls c.Respond and returns nil: no later Access
// runs and nothing is proxied. Rejecting is not an error. An error is an internal fault
// (shared memory that cannot be read, a configuration the snapshot contradicts): the
// chain stops, and the worker answers 500 in one place, with the error's text as
// error_msg (so it says what failed and never holds a secret) and the plugin's name in
// the error log.
type AccessPhase interface {
	Access(c *Ctx) error
}

// LogPhase runs once the response is final, proxied or not, in chain order. It cannot
// change the response.
type LogPhase interface {
	Log(c *Ctx)
}

// ConsumerAuth is implemented by an authentication plugin (key-auth, basic-auth): it
// names the request's consumer from a credential the consumer holds. A consumer's
// configuration of such a plugin is that credential: the Admin API checks it with
// ValidateConsumer instead of Validate, and it is never merged into a route's chain as a
// consumer's other plugins are.
type ConsumerAuth interface {
	// ValidateConsumer checks a consumer's configuration of the plugin strictly, as
	// Validate does a route's, and refuses a secret reference gw cannot resolve.
	ValidateConsumer(raw json.RawMessage) error
	// CredentialField names the string member no two consumers may share (APISIX's
	// plugin_unique_key_attrs): key-auth's "key", basic-auth's "username".
	CredentialField() string
	// SecretFields names the string members that may be a secret reference
	// ($env://NAME; see conf.ParseSecretRef). The master resolves them before a snapshot
	// reaches workers (ResolveSecrets); a member that still reads as a reference there had
	// no value, and must match no request.
	SecretFields() []string
}

// SnapshotBuilder is implemented by a plugin whose instances share what it makes of the
// whole snapshot (key-auth's index of every consumer's key, limit-count's groups).
// BuildSnapshot runs once per snapshot, before the snapshot's first Build of the plugin,
// and its result is Env.SnapshotState in every Build of the snapshot; an error fails
// every route that configures the plugin. snap may be nil (a chain built outside a
// snapshot, in tests). The result is shared by every route, concurrently: it must not
// change after BuildSnapshot returns.
type SnapshotBuilder interface {
	BuildSnapshot(snap *conf.Snapshot, shared *Shared) (any, error)
}

// SnapshotChecker is implemented by a plugin with a rule that spans objects
// (limit-count's group: every object that names one group configures it the same). The
// Admin API calls CheckWrite for each write of an object that configures the plugin (a
// route, service, plugin config, global rule or consumer) and refuses the write on an
// error. object names the written object as "kind/id" ("routes/1"), raw is its
// configuration of the plugin, which Validate has accepted, and stored is the config
// before the write: the object's previous version is in it, so a rule can hold an object
// to what it already promised.
type SnapshotChecker interface {
	CheckWrite(stored *conf.Snapshot, object string, raw json.RawMessage) error
}

// Described is implemented by a plugin that publishes the JSON Schema of its
// configuration on a route, service, plugin config or global rule, which the Admin API
// serves at GET /apisix/admin/plugins/{name} as APISIX does. The schema describes what
// Validate accepts: every configuration Validate accepts, the schema accepts too, and
// what the schema refuses, Validate refuses (Validate may refuse more, such as a variable
// gw does not know). The bytes are one JSON object, never changed by the caller.
type Described interface {
	Schema() []byte
}

// ConsumerDescribed is implemented by a ConsumerAuth plugin that publishes the JSON
// Schema of a consumer's configuration of it, what ValidateConsumer accepts, served with
// ?schema_type=consumer.
type ConsumerDescribed interface {
	ConsumerSchema() []byte
}

// MetadataOwner is implemented by a plugin that has APISIX's plugin_metadata: settings
// shared by every route that configures it, written at /apisix/admin/plugin_metadata/
// {name} (the loggers' log_format). The Admin API refuses metadata for any other plugin
// ("no metadata schema for plugin ..."): accepted, it would do nothing. ValidateMetadata
// checks the stored object strictly, as Validate does a route's configuration, and
// accepts the create_time and update_time the Admin API adds; MetadataSchema is its JSON
// Schema. Build reads the metadata in Env.Metadata, checked already: a worker leaves out
// stored metadata its plugin refuses. A write of metadata builds every route again, so
// instances may resolve it once, at Build.
type MetadataOwner interface {
	ValidateMetadata(raw json.RawMessage) error
	MetadataSchema() []byte
}

// RequestKeeper is implemented by a plugin that never changes the request sent upstream:
// its method, target or headers (limit-count and prometheus only count). A route whose
// plugins all keep it (or edit only headers: HeaderEditor) has the client's header block
// sent as it came, filtered, rather than re-serialised (proxy.Info.Pristine). A built
// instance may implement it too
// and then decides for its configuration (key-auth keeps the request unless
// hide_credentials). Return false, or implement nothing, when in doubt: false is always
// correct, only slower.
type RequestKeeper interface {
	KeepsRequest() bool
}

// HeaderEditor is implemented by a plugin whose only changes to the request sent upstream
// are header fields set, added or removed through Ctx's SetRequestHeader,
// AddRequestHeader and DelRequestHeader (opentelemetry's traceparent, request-id's id).
// Such a route's request still goes upstream as the client's header block, filtered, with
// the Ctx's HeaderEdits applied (proxy.Info.Pristine and Edits); one that edits a name the
// proxy sets itself (Host, Connection, X-Forwarded-*, X-Real-IP) goes the usual way. As
// with RequestKeeper, false is always correct.
type HeaderEditor interface {
	EditsOnlyHeaders() bool
}

// SegmentOwner is implemented by a plugin that keeps state in shared memory: the master
// creates its segment at start, keeps it for its life and hands it to every worker and
// to a new master on upgrade; workers find it in Shared.Segments under the plugin's name.
type SegmentOwner interface {
	Segment() *SegmentSpec
}

// RouteInfo is what plugins may know about the route a request matched. It is built with
// the snapshot and never changes; plugins may keep a pointer to it. Which of the route's
// paths and hosts matched is the request's own: Ctx's MatchedURI and MatchedHost.
type RouteInfo struct {
	ID          string
	Name        string
	ServiceID   string
	ServiceName string
}

// Env is what Build gets: the route the instance is for and the worker's shared state.
// Build must not keep it.
type Env struct {
	Route  *RouteInfo
	Shared *Shared
	// Snapshot is the whole config being built.
	Snapshot *conf.Snapshot
	// GlobalRuleID is set when the instance comes from a global rule: its state (limit-count's
	// counters) then belongs to the rule and is shared by every route, as APISIX keys it by
	// the configuration's owner (conf_type and conf_id), not by the matched route.
	GlobalRuleID string
	// SnapshotState is what the plugin's BuildSnapshot made of Snapshot (SnapshotBuilder),
	// the same value for every route of the snapshot; nil for other plugins.
	// BuildInstance sets it.
	SnapshotState any
	// Metadata is the plugin's stored plugin_metadata (MetadataOwner), nil when it has
	// none or is no MetadataOwner. BuildInstance sets it from Snapshot.
	Metadata json.RawMessage

	// build holds the snapshot's states; nil for an Env made by hand, whose every build
	// runs BuildSnapshot afresh.
	build *SnapshotBuild
}

// ResponsePhase runs once the response is final, whoever made it (the upstream, whose
// body may still be streaming from the node; a plugin's Respond; the worker's 404 or
// 500), after the queued response headers are set and before the log phase, in chain
// order. It changes the response through the Ctx's response methods (SetStatus,
// SetResponseHeader, ReadResponseBody, SetResponseBody and the rest), as APISIX's
// header_filter and body_filter do; a streamed body stays streamed unless it reads or
// replaces it. It cannot fail: a response it cannot change is left as it is
// (plugins-c: response-rewrite, gzip).
type ResponsePhase interface {
	Response(c *Ctx)
}

// UpstreamChooser is implemented by an instance that chooses, per request, the upstream
// the request goes to from a fixed set (traffic-split's weighted upstreams). The host
// compiles every upstream of Upstreams once per snapshot, with the route's, as it
// compiles a route's own (a stored one is the snapshot's, shared with every route that
// names it); the access phase names its choice with Ctx.UseUpstream, an index into the
// set, and the host proxies there instead of to the route's upstream. A choice is an
// index, not a connection or an address, so the hook is the same whatever protocol
// carries the request or the upstream. The set must not change after Build.
type UpstreamChooser interface {
	Upstreams() []UpstreamRef
}

// UpstreamRef is one upstream an UpstreamChooser may choose: a stored one by ID, or
// Upstream, inline and decoded (conf.DecodeUpstream).
type UpstreamRef struct {
	ID       conf.ID
	Upstream *conf.Upstream
}

// UpstreamReferrer is implemented by a plugin whose configuration names stored upstreams
// by id (traffic-split's upstream_id). The worker rebuilds the routes whose plugins name
// an upstream when it changes, as it does the routes whose upstream_id names it, and the
// Admin API refuses to delete an upstream a configuration still names. raw is a
// configuration Validate has accepted.
type UpstreamReferrer interface {
	UpstreamIDs(raw json.RawMessage) []conf.ID
}

// UpstreamIDsOf lists the stored upstreams the plugin set names (UpstreamReferrer), nil
// for none.
func UpstreamIDsOf(set map[string]json.RawMessage) []conf.ID {
	var ids []conf.ID
	for name, raw := range set {
		if p, ok := Lookup(name); ok {
			if r, ok := p.(UpstreamReferrer); ok {
				ids = append(ids, r.UpstreamIDs(raw)...)
			}
		}
	}
	return ids
}
