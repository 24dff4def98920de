// Package etcdstore keeps a node's Admin API objects in etcd, in APISIX 3's key layout, so
// that many gw nodes (and APISIX nodes) share one config.
//
// Layout: every object is <prefix>/<kind>/<id> (kind: routes, upstreams, services,
// consumers, plugin_configs, global_rules, ssls), its value the object's JSON as the Admin
// API stores it; POST ids are the revision of a put to <prefix>/gen_id, as APISIX makes
// them. Other keys under the prefix are not gw's and are ignored.
//
// The decision: etcd is not a store.Backend. A Backend records revisions the Store
// assigns; etcd assigns them itself, orders the writes of every node, and tells each node
// of every change, its own included. So etcd is a store.Remote: the master's Store keeps
// its memdb index as the node's view, and this package's Sync is the only thing that
// changes it, from one list and then one watch per node (the master) starting at the
// revision of that list. An Admin API write goes to etcd (a plain put, or for PATCH a
// transaction comparing the mod revision), then waits until the watch has brought its
// revision back into the Store and the workers serve it; createdIndex and modifiedIndex
// are etcd's create and mod revisions.
//
// Consistency: the workers serve a prefix of etcd's history, one watch response at a time,
// in revision order; the revision the workers serve is known (Master.ServedRevision), so
// a cluster-wide read-your-writes can wait on it later. A compacted revision ends the
// watch: the node lists again and publishes the difference as one change, serving the old
// config until then. An object that does not decode or does not build is left out and
// reported, as one in data_dir is, and never stops the node.
//
// Crash and outage model: etcd is the truth. The node keeps a copy of the last config it
// applied in <data_dir>/etcd-cache.json, written whole and atomically (temporary file,
// fsync, rename) at most once a second; a node that starts while etcd is unreachable
// serves that copy, says so, and catches up when etcd answers. The copy may be up to a
// second behind what the node served: it is a fallback, never a source of writes. With
// etcd down, writes fail within deployment.etcd.write_timeout with 503 and nothing
// changes; the node keeps serving, and the watch resumes from its last revision.
package etcdstore
