// Package standalone reads and writes APISIX's standalone config file (conf/apisix.yaml,
// or conf/apisix.json), the config_provider that takes a node's objects from one file
// instead of an Admin API store.
//
// The file is one mapping of kind to a list of objects, as APISIX's
// apisix/core/config_yaml.lua reads it:
//
//	routes:
//	  - id: 1
//	    uri: /hello
//	    upstream_id: web
//	upstreams:
//	  - id: web
//	    nodes: {"127.0.0.1:1980": 1}
//	#END
//
// Each object is what the Admin API takes for that kind, its id in "id" (a consumer's is
// its "username"). An object without an id gets APISIX's key for it, arr_<n>, n its place
// in the list from 1. A YAML file is read only once its last line is "#END": a writer
// that has not finished (or a copy under way) leaves the file unread, as APISIX does. A
// JSON file needs no marker: it does not parse until it is whole.
//
// Parse checks the file's shape (a mapping of known kinds to lists of mappings, ids that
// are valid and unique in their kind) and nothing more: it turns each object into the
// JSON the Admin API stores, and whether that object validates and builds is the
// master's to judge, object by object, as for objects in etcd. Encode writes what a
// store holds in this format, so a running node's config can be frozen into a file.
package standalone
