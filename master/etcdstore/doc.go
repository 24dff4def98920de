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
// in revision order; the revision the workers serve is known (Master.ServedRevision). A
// compacted revision ends the
// watch: the node lists again and publishes the difference as one change, serving the old
// config until then. An object that does not decode or does not build is left out and
// reported, as one in data_dir is, and never stops the node.
//
// Read-your-writes across the cluster (cluster.go): each node keeps a record at
// <prefix>/gw/nodes/<node-id> (the id made once and kept in data_dir), JSON {revision,
// role, hostname, pid, version, updated}, under a lease of NodeTTL (10 s) that the etcd
// client renews every third of it. The record is put whenever the revision the node's
// workers serve grows, one put in flight at most, carrying the newest revision. Each node
// watches <prefix>/gw/nodes/ apart from its config watch (a second watch on the same
// connection), so its view of the records stays current while the config watch waits
// for workers. An Admin API write, once this node's workers serve its revision R, waits
// until every other record of a node that serves data is at R or more, or for
// deployment.etcd.cluster_wait_timeout (default 5 s): then 503, naming the nodes that
// lag; the write is kept and they catch up. Live means holding a lease: a node killed,
// stopped, or cut off from etcd stops counting NodeTTL after its last renewal; one that
// quits revokes its lease and stops counting at once; one that starts counts once it has
// put its first record (it lists etcd anyway). A control_plane node has no workers: it
// keeps a record (gwctl status lists it) with role control_plane and is never waited
// for. The config watch skips <prefix>/gw/ and does not count its revisions, or each
// record put would raise every node's served revision and be put again, without end.
// APISIX sharing the etcd passes over <prefix>/gw/: it reads only the directories it
// knows (apisix/core/config_etcd.lua filters its one watch by each directory's key).
//
// Crash and outage model: etcd is the truth. The node keeps a copy of the last config it
// applied in <data_dir>/etcd-cache.json, written whole and atomically (temporary file,
// fsync, rename) at most once a second; a node that starts while etcd is unreachable
// serves that copy, says so, and catches up when etcd answers. The copy may be up to a
// second behind what the node served: it is a fallback, never a source of writes. With
// etcd down, writes fail within deployment.etcd.write_timeout with 503 and nothing
// changes; the node keeps serving, and the watch resumes from its last revision.
package etcdstore
