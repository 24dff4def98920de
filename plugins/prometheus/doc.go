// Package prometheus is APISIX's prometheus plugin (priority 500) and the metrics table
// behind the master's export server. A route's instance (built once per snapshot)
// resolves its fixed labels (route, service, with prefer_name) at build time; per
// request, Log hashes the status code, node, consumer and the uri and host the request
// matched (plugins.Ctx's MatchedURI and MatchedHost, which the router reports) into a
// small copy-on-write cache of resolved entries and makes eight atomic adds into
// shared memory: two per latency histogram (request, upstream when one answered, apisix)
// and two for bandwidth. No lock, no allocation, no label formatting.
//
// The table lives in the "metrics" segment, which the master creates at start and keeps
// for its life, so counts outlive any worker (kill -9 included) and every worker adds to
// the same words: sums are exact by construction. Layout: a control block, 256 worker
// areas (connection gauges and request counts per live worker process, retired by the
// master as it reaps the process and claimed again by a later one, which adds on to the
// counts; conns.go has the argument), an
// open-addressing index of 64-bit slots, and fixed-size entries (EntrySize bytes). An
// entry is one full label set: its hash, its status code, the label values as
// length-prefixed text (values over 100 bytes are cut and end in a hash), and its
// counters: per-bucket (not cumulative) latency counts and a nanosecond sum per type, and
// ingress and egress bytes. A request-latency histogram's count is the entry's
// apisix_http_status count. A new label set claims an entry with one atomic add on the
// "used" word, writes it, then publishes it with a CAS on its index slot; a process that
// dies in between wastes the entry and leaves nothing half-visible. When the table is
// full (prometheus.max_series, within shm.metrics) new label sets fold into entry 0, the
// overflow series (every label empty, code=""), and are counted.
//
// The master's Exporter reads the segment on each scrape, so a scrape reflects every
// request whose log phase has finished. Instance-wide families are VictoriaMetrics gauges
// and counters with HELP and TYPE; apisix_http_status, apisix_http_latency and
// apisix_bandwidth are summed from shared memory and written by the exporter itself,
// because VictoriaMetrics' histogram can only be fed observations, not given bucket sums
// kept elsewhere, and its Write* helpers repeat metadata per series and format through fmt,
// too slow for tens of thousands of series. Package gw/internal/textparse checks the
// result strictly in tests.
package prometheus
