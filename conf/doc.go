// Package conf holds gw's configuration and object schemas: it decodes strictly, applies
// defaults, validates and reports every problem with its path. Two kinds of input meet
// here. The static conf/config.yaml (gw's own schema, not APISIX's) is read by Load at
// start and on reload; the shipped file is embedded and is the only source of defaults,
// and a user's file, even a partial one, is merged over it key by key. The Admin API
// objects (routes, upstreams, services, in APISIX 3.x shapes) are decoded one at a time as
// the master receives them and travel to workers inside an immutable Snapshot; the Admin
// API stores and returns the client's own JSON, so the decoded forms need not round-trip
// byte for byte. Nothing in this package does I/O beyond reading the one config file, and
// it imports no other gw package.
//
// Each file holds one schema, its type, its decoding and its checks:
//
//	config.yaml (gw's own)
//	  config.go               Config and its sections
//	  config_load.go          Load, Parse, the YAML walk and the checks of most keys
//	  config_env.go           ${{NAME}} and ${{NAME:=default}}: environment variables, as APISIX
//	  config_edge.go          client limits and timeouts, real_ip_*
//	  config_ssl.go           ssl: the TLS listener
//	  config_upstream_tls.go  ssl.ssl_trusted_certificate (internal/confio reads the file)
//	  config_plugin_attr.go   plugin_attr: plugins' node-wide settings (opentelemetry)
//	Admin API objects (APISIX's)
//	  route.go, service.go, consumer.go, plugin_config.go, global_rule.go, ssl.go
//	  plugin_metadata.go      a plugin's shared settings, whose members the plugin checks
//	  upstream.go             the upstream and its checks that span fields
//	  upstream_defaults.go    every default an upstream gets (the worker invents none)
//	  upstream_normal.go      Normalize: an upstream checked once, as enums and durations
//	  upstream_nodes.go       nodes, in both forms
//	  upstream_tls.go         tls and client certificates
//	  upstream_healthcheck.go checks
//	  snapshot.go             Snapshot, LeftOut and Delta: what workers serve from
//	shared by the objects
//	  decode.go               the strict JSON decoder and ObjectError
//	  fields.go               fields several kinds have (name, labels, uri, hosts, timeout)
//	  ranges.go               the range of every number
//	  ids.go, text.go, secretref.go
//	  vars.go, variable.go, template.go   the variable language
package conf
