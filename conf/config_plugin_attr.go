package conf

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// PluginAttr is the plugin_attr section: settings of a plugin that belong to the node, not
// to a route (APISIX's plugin_attr). Only plugins with such settings have a key here:
// opentelemetry. APISIX's plugin_attr.prometheus (the export server) is gw's top-level
// prometheus section, which predates this one; a plugin_attr.prometheus key is refused
// with a pointer there rather than read in two places.
type PluginAttr struct {
	OpenTelemetry OpenTelemetryAttr `json:"opentelemetry"`
}

// OpenTelemetryAttr is plugin_attr.opentelemetry: where and how each worker sends the
// spans of routes with the opentelemetry plugin. Fixed for a worker's life; a reload
// starts workers with the new one.
type OpenTelemetryAttr struct {
	// TraceIDSource is TraceIDRandom or TraceIDFromRequestID.
	TraceIDSource string `json:"trace_id_source"`
	// Resource are the resource's attributes, in file order; each value is a string, a
	// float64 or a bool. service.name is APISIX's "APISIX" unless set.
	Resource  []KeyValue         `json:"resource"`
	Collector OTelCollector      `json:"collector"`
	Batch     OTelBatchProcessor `json:"batch_span_processor"`
}

// KeyValue is one attribute of a free-form mapping: Value is a string, float64 or bool.
type KeyValue struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// The trace_id_source values (APISIX's).
const (
	// TraceIDRandom makes a random trace id for a request without a valid traceparent.
	TraceIDRandom = "random"
	// TraceIDFromRequestID takes it from the request's X-Request-Id when that is 32 hex
	// digits, with or without a UUID's dashes (request-id's uuid runs first), else random.
	TraceIDFromRequestID = "x-request-id"
)

// OTelCollector is where spans go: OTLP/HTTP protobuf, POSTed to URL().
type OTelCollector struct {
	// Address is host:port as written, an http:// or https:// prefix allowed.
	Address string `json:"address"`
	// RequestTimeout bounds one export, connect to response.
	RequestTimeout time.Duration `json:"request_timeout"`
	// RequestHeaders are sent with every export (an Authorization token), in file order.
	RequestHeaders []KeyValue `json:"request_headers"`
}

// OTelBatchProcessor is how spans leave a worker: a queue of MaxQueueSize spans, which
// the exporter empties in batches of MaxExportBatchSize, at once when a batch is full and
// at the latest BatchTimeout after the batch's first span or every InactiveTimeout,
// whichever comes first. A span that finds the queue full is dropped and counted; with
// DropOnQueueFull false it also wakes the exporter at once (APISIX's "force process
// batches"); the request never waits either way.
type OTelBatchProcessor struct {
	DropOnQueueFull    bool          `json:"drop_on_queue_full"`
	MaxQueueSize       int           `json:"max_queue_size"`
	BatchTimeout       time.Duration `json:"batch_timeout"`
	InactiveTimeout    time.Duration `json:"inactive_timeout"`
	MaxExportBatchSize int           `json:"max_export_batch_size"`
}

// Bounds of plugin_attr.opentelemetry. A queued span holds about 1 KiB of copied
// request fields, so the largest queue is about 64 MiB per worker.
const (
	maxOTelQueue   = 1 << 16
	maxOTelSeconds = 3600
)

func (l *loader) pluginAttr(path string, n *yaml.Node, a *PluginAttr) {
	l.mapping(n, path, []yamlField{
		{"opentelemetry", func(p string, v *yaml.Node) { l.openTelemetryAttr(p, v, &a.OpenTelemetry) }},
		{"prometheus", func(p string, v *yaml.Node) {
			l.errorf(v.Line, p, "gw reads the metrics export server from the top-level prometheus section (enabled, export_addr, export_uri); move these settings there")
		}},
	})
}

func (l *loader) openTelemetryAttr(path string, n *yaml.Node, o *OpenTelemetryAttr) {
	l.mapping(n, path, []yamlField{
		{"trace_id_source", yamlInto(&o.TraceIDSource, l.oneOfThese(TraceIDFromRequestID, TraceIDRandom))},
		{"resource", yamlInto(&o.Resource, l.scalarMapping)},
		{"collector", func(p string, v *yaml.Node) {
			l.mapping(v, p, []yamlField{
				{"address", yamlInto(&o.Collector.Address, l.collectorAddress)},
				{"request_timeout", yamlInto(&o.Collector.RequestTimeout, l.secondsIn(false))},
				{"request_headers", yamlInto(&o.Collector.RequestHeaders, l.requestHeaders)},
			})
		}},
		{"batch_span_processor", func(p string, v *yaml.Node) {
			b := &o.Batch
			l.mapping(v, p, []yamlField{
				{"drop_on_queue_full", yamlInto(&b.DropOnQueueFull, l.boolean)},
				{"max_queue_size", yamlIntInto(&b.MaxQueueSize, l.intIn(1, maxOTelQueue))},
				{"batch_timeout", yamlInto(&b.BatchTimeout, l.secondsIn(true))},
				{"inactive_timeout", yamlInto(&b.InactiveTimeout, l.secondsIn(true))},
				{"max_export_batch_size", yamlIntInto(&b.MaxExportBatchSize, l.intIn(1, maxOTelQueue))},
			})
		}},
		{"set_ngx_var", func(p string, v *yaml.Node) {
			if on, ok := l.boolean(p, v); ok && on {
				l.errorf(v.Line, p, "true is not supported yet: gw has no opentelemetry_* variables for the access log; leave it false")
			}
		}},
	})
}

// crossCheckPluginAttr checks what spans keys of plugin_attr.
func (l *loader) crossCheckPluginAttr(c *Config) {
	b := c.PluginAttr.OpenTelemetry.Batch
	if b.MaxExportBatchSize > b.MaxQueueSize && b.MaxQueueSize > 0 {
		const base = "plugin_attr.opentelemetry.batch_span_processor."
		p := l.pick(base+"max_export_batch_size", base+"max_queue_size")
		l.errorf(l.lines[p], p, "max_export_batch_size %d is larger than max_queue_size %d; a batch is taken from the queue", b.MaxExportBatchSize, b.MaxQueueSize)
	}
}

// secondsIn reads a positive number of seconds, as APISIX writes these keys (3, 0.5),
// at most an hour; fraction allows a fractional one.
func (l *loader) secondsIn(fraction bool) func(string, *yaml.Node) (time.Duration, bool) {
	return func(path string, v *yaml.Node) (time.Duration, bool) {
		forms := "must be a whole number of seconds from 1 to 3600"
		if fraction {
			forms = "must be a number of seconds (0.5, 2) more than 0 and at most 3600"
		}
		var secs float64
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!int":
			n, ok := yamlInt(v)
			if !ok {
				l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
				return 0, false
			}
			secs = float64(n)
		case v.Kind == yaml.ScalarNode && v.Tag == "!!float" && fraction:
			f, err := strconv.ParseFloat(v.Value, 64)
			if err != nil || math.IsNaN(f) {
				l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
				return 0, false
			}
			secs = f
		default:
			l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
			return 0, false
		}
		d := time.Duration(secs * float64(time.Second))
		if secs <= 0 || secs > maxOTelSeconds || d < time.Millisecond {
			l.errorf(v.Line, path, "%s, got %s", forms, describeYAML(v))
			return 0, false
		}
		return d, true
	}
}

// URL is where spans are POSTed: http://address/v1/traces, or https:// when the address
// says so.
func (c OTelCollector) URL() string {
	scheme, hostPort := splitScheme(c.Address)
	return scheme + "://" + hostPort + "/v1/traces"
}

func splitScheme(address string) (scheme, hostPort string) {
	if rest, found := strings.CutPrefix(address, "http://"); found {
		return "http", rest
	}
	if rest, found := strings.CutPrefix(address, "https://"); found {
		return "https", rest
	}
	return "http", address
}

// collectorAddress checks collector.address, APISIX's "host:port" (an http:// or https://
// prefix allowed).
func (l *loader) collectorAddress(path string, v *yaml.Node) (string, bool) {
	s, ok := l.nonEmptyString(path, v)
	if !ok {
		return "", false
	}
	_, hostPort := splitScheme(s)
	host, port, err := net.SplitHostPort(hostPort)
	if err == nil {
		var n uint64
		n, err = strconv.ParseUint(port, 10, 16)
		if err == nil && (n == 0 || host == "" || strings.ContainsAny(host, "/?#@ ")) {
			err = fmt.Errorf("bad host or port")
		}
	}
	if err != nil {
		l.errorf(v.Line, path, `must be "host:port" (an http:// or https:// prefix allowed), got %s`, describeYAML(v))
		return "", false
	}
	return s, true
}

// scalarMapping reads a mapping of names to strings, numbers (float64) or booleans, as
// APISIX's resource; null is the empty mapping.
func (l *loader) scalarMapping(path string, v *yaml.Node) ([]KeyValue, bool) {
	if isYAMLNull(v) {
		return []KeyValue{}, true
	}
	if v.Kind != yaml.MappingNode {
		l.errorf(v.Line, path, "must be a mapping of names to strings, numbers or booleans, got %s", describeYAML(v))
		return nil, false
	}
	kvs, valid := []KeyValue{}, true
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := yamlDeref(v.Content[i]), yamlDeref(v.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			l.errorf(k.Line, path, "keys must be plain names, got %s", describeYAML(k))
			valid = false
			continue
		}
		p := memberPath(path, k.Value)
		if seen[k.Value] {
			l.errorf(k.Line, p, "set twice; keep one")
			valid = false
			continue
		}
		seen[k.Value] = true
		kv := KeyValue{Key: k.Value}
		switch {
		case val.Kind == yaml.ScalarNode && val.Tag == "!!str":
			kv.Value = val.Value
		case val.Kind == yaml.ScalarNode && val.Tag == "!!bool":
			kv.Value = val.Value == "true" || val.Value == "True" || val.Value == "TRUE"
		case val.Kind == yaml.ScalarNode && (val.Tag == "!!int" || val.Tag == "!!float"):
			f, err := strconv.ParseFloat(val.Value, 64)
			if n, ok := yamlInt(val); ok {
				f, err = float64(n), nil
			}
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				l.errorf(val.Line, p, "must be a string, a finite number or a boolean, got %s", describeYAML(val))
				valid = false
				continue
			}
			kv.Value = f
		default:
			l.errorf(val.Line, p, "must be a string, a number or a boolean, got %s", describeYAML(val))
			valid = false
			continue
		}
		kvs = append(kvs, kv)
	}
	return kvs, valid
}

// requestHeaders reads collector.request_headers: header names to values (numbers and
// booleans are sent as written).
func (l *loader) requestHeaders(path string, v *yaml.Node) ([]KeyValue, bool) {
	kvs, ok := l.scalarMapping(path, v)
	if !ok {
		return nil, false
	}
	for i, kv := range kvs {
		if !isToken(kv.Key) {
			l.errorf(v.Line, memberPath(path, kv.Key), "must be a header field name (letters, digits and !#$%%&'*+-.^_`|~)")
			ok = false
		}
		switch x := kv.Value.(type) {
		case float64:
			kvs[i].Value = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			kvs[i].Value = strconv.FormatBool(x)
		case string:
			if strings.ContainsAny(x, "\r\n\x00") {
				l.errorf(v.Line, memberPath(path, kv.Key), "must not hold a line break or NUL, got %q", x)
				ok = false
			}
		}
	}
	return kvs, ok
}

// isToken reports whether s is an HTTP token (RFC 9110), as a header name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch <= 0x20 || ch >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, ch) >= 0 {
			return false
		}
	}
	return true
}
