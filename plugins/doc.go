// Package plugins is the plugin contract and the registry. Each plugin lives in a
// sub-package that registers one value in init(); importing plugins/all links every
// plugin in. The host (master and worker) imports this package and plugins/all, never a
// particular plugin: it knows a plugin by the Plugin interface and by the small optional
// interfaces it finds on it by type assertion, as Caddy finds Provisioner and CoreDNS
// finds Readiness. A test in plugins/all keeps it so.
//
// # Life of a plugin
//
// Validate runs in the master at every Admin API write (pure, fast, strict). Per config
// snapshot, in each worker (and in the master's check of a write), BuildSnapshot runs
// once for a SnapshotBuilder, then Build once per route, each route's instances ordered
// into a Chain by priority, highest first (APISIX's numbers). Per request the chain runs
// the access phase (AccessPhase) until a plugin answers, the worker proxies unless one
// did, the response phase (ResponsePhase) may change the final response whoever made it,
// and the log phase (LogPhase) runs once the response is final. An instance is shared
// by every request of its route, concurrently, and never changes; per-snapshot state
// lives in the SnapshotBuild the worker holds while it builds, never in a plugin's
// package. Registration panics on a duplicate name; an instance that runs in no phase is
// a build error.
//
// # Answers and faults
//
// A plugin that answers a request itself (a 401, a 429) calls Ctx.Respond and returns
// nil: rejecting is not an error. An error from Access is an internal fault: the chain
// stops, wraps it in a PluginError naming the plugin, and the worker answers 500 in one
// place, with the error's text as error_msg (APISIX's plugins return theirs so) and a
// line in the error log at most once a second. A plugin never writes its own 5xx.
//
// # What a plugin offers the host
//
// Each is an optional interface on the registered value:
//
//   - ConsumerAuth: an authentication plugin. A consumer's configuration of it is a
//     credential: the Admin API checks it with ValidateConsumer, refuses two consumers
//     with one CredentialField, and the master resolves its SecretFields ($env://NAME)
//     before workers see them (ResolveSecrets). It is never merged into a route's chain.
//   - SnapshotBuilder: state built once per snapshot that every route's instance reaches
//     through Env.SnapshotState (key-auth's index of keys, limit-count's groups).
//   - SnapshotChecker: a rule across objects the Admin API checks at each write of an
//     object that configures the plugin, against the objects stored (limit-count's
//     groups).
//   - Described and ConsumerDescribed: the JSON Schema of the plugin's configuration, and
//     of a consumer's for an auth plugin, which the Admin API serves at
//     /apisix/admin/plugins/{name}. It describes what Validate accepts; plugins/all's
//     tests hold every configuration in the plugin's tests and README to it.
//   - MetadataOwner: the plugin has APISIX's plugin_metadata, settings shared by every
//     route (the loggers' log_format), checked by the Admin API with ValidateMetadata
//     and given to Build in Env.Metadata.
//   - RequestKeeper: the plugin never changes the request, so its routes may send the
//     client's header block as it came. A built instance may implement it too, deciding
//     for its configuration (key-auth, unless hide_credentials).
//   - HeaderEditor: the plugin changes only header fields, through Ctx's
//     SetRequestHeader, AddRequestHeader and DelRequestHeader, which the Ctx records
//     (HeaderEdits), so its routes still send the client's header block, edited
//     (opentelemetry's traceparent, request-id's id).
//   - SegmentOwner: a shared-memory segment, made by the master for its life, handed to
//     every worker and to a new master on upgrade. Its SegmentSpec may report FreeBytes
//     and Evictions, which the metrics export reads.
//   - ConnWatcher: an observer of every client connection's state changes in each worker
//     (prometheus's connection gauges).
//   - UpstreamChooser (on an instance): the upstreams the instance may send a request
//     to instead of the route's, which the worker compiles with the route; the access
//     phase picks one with Ctx.UseUpstream (traffic-split).
//   - UpstreamReferrer: the stored upstreams a configuration names by id, so that a
//     write of one rebuilds the routes that name it and the Admin API refuses its
//     delete (traffic-split's upstream_id).
//   - MasterPart: work of the plugin's own in the master, told of each worker's exit
//     before the reap; a part that is a MetricsWriter renders the master's metrics page.
//
// The host has segments of its own, which belong to no plugin and no route can
// configure; it asks for them with RegisterSegment (the upstream health table,
// HealthSegment). A table in shared memory with one user lives in that user's package
// (limit-count's window table, prometheus's metrics table); package shm keeps segments
// and the primitives tables are made of (KeyHash). The health table has two users, the
// master's checker that writes it and the worker's proxy that reads and feeds it, both
// host packages: it stays in shm, the one package both import that sits below both, and
// moving it into either would make the other reach across the master/worker line.
//
// # The request as plugins see it
//
// A plugin sees a request through Ctx's methods only: Method, Path, Host, QueryArg,
// RequestHeader and the rest to read, SetPath, SetRequestHeader, DelQueryArg and the rest
// to change what goes upstream, Respond, Status, AddResponseHeader, RequestSize and
// ResponseSize for the response. They name what every HTTP version has (a method, a path,
// an authority, header fields named case-insensitively as byte strings, a status, a
// body), the shape of Pingora's Session and Envoy's header maps, and nothing of
// HTTP/1.1's wire: no request line, no raw header block, no connection. Today each
// method reads the fasthttp.RequestCtx the worker serves (Ctx.Request). The next issue
// serves HTTP/2 streams and gRPC through the same chain: the worker will back a Ctx with a
// stream instead, each method switching on which of the two it holds (two concrete
// pointers, no interface call and no allocation per method); a plugin written against the
// methods runs unchanged on both, and the zero-allocation tests keep the methods honest.
// Nothing a plugin keeps refers to HTTP/1.1: RequestSize and ResponseSize estimate
// nginx's $request_length and $bytes_sent for whichever protocol carries the request. A
// plugin reads variables through Ctx.VarsRequest, and keeps what its access phase took for a
// request (limit-conn's place in shared memory) in the Ctx (AddHold, TakeHold), since
// its log phase runs even when its access phase did not.
//
// What is left of the seam: Ctx.Request is deprecated and read by two files only,
// limit-count's key variables (keys.go) and proxy-rewrite's template variables
// (template.go, fed by its handler), which the variable language is moving onto
// conf/vars.go; they should read variables through the Ctx's methods then, and the list
// in plugins/all's TestPluginsSeeRequestsThroughTheCtx only shrinks. A plugin that reads
// variables without either takes Ctx.VarsRequest, the one place in the contract that
// hands plugins/vars the request (fault-injection, real-ip, redirect do), so an HTTP/2
// stream needs teaching vars once, not each plugin. A response body is a whole byte
// slice (ReadResponseBody, SetResponseBody), or, streaming from the node, a reader a
// plugin may wrap (WrapResponseStream: gzip and brotli compress it as it streams; the
// wrapper owns the node's stream and closes it). A body phase that sees each piece of a
// stream on its own (gRPC messages) does not exist yet.
//
// # Adding a plugin
//
// One folder, one line. Make plugins/<name> (the package name is the plugin's name
// without '-') with the files every plugin folder has:
//
//   - config.go: const Name and Priority, the registered type (type plugin struct{}),
//     its Name, Priority and Validate methods, the configuration struct and Parse, strict
//     and with field paths in every message (package pluginconf reads members), and
//     func init() { plugins.Register(plugin{}) }.
//   - handler.go: Build, the instance and its phases, and any optional interface the
//     plugin needs (above), each with its interface guard,
//     var _ plugins.AccessPhase = (*handler)(nil).
//   - doc.go: the plugin's model in a paragraph.
//   - README.md: schema, behaviour, examples, metrics, cost, and which interfaces it
//     implements.
//   - tests beside the code: table tests of Parse's every accept and reject, the phases
//     through plugins.BuildInstance, and an allocation test (testing.AllocsPerRun) of the
//     request path.
//
// Then add the import to plugins/all/all.go. The host needs no change: what the plugin
// offers it, it finds. Read the request and write the response through the Ctx's
// methods only, never a protocol's types.
package plugins
