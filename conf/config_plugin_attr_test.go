package conf

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func wantDefaultPluginAttr() PluginAttr {
	return PluginAttr{OpenTelemetry: OpenTelemetryAttr{
		TraceIDSource: TraceIDRandom,
		Resource:      []KeyValue{{Key: "service.name", Value: "APISIX"}},
		Collector: OTelCollector{Address: "127.0.0.1:4318", RequestTimeout: 3 * time.Second,
			RequestHeaders: []KeyValue{}},
		Batch: OTelBatchProcessor{DropOnQueueFull: true, MaxQueueSize: 2048, BatchTimeout: 5 * time.Second,
			InactiveTimeout: 2 * time.Second, MaxExportBatchSize: 256},
	}}
}

func TestPluginAttrAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(*OpenTelemetryAttr)
	}{
		{"issue's example", `plugin_attr:
  opentelemetry:
    resource: {service.name: gw}
    collector: {address: 127.0.0.1:4318, request_timeout: 3, request_headers: {}}
    batch_span_processor: {max_queue_size: 1024, max_export_batch_size: 16, inactive_timeout: 2}`,
			func(o *OpenTelemetryAttr) {
				o.Resource = []KeyValue{{Key: "service.name", Value: "gw"}}
				o.Batch.MaxQueueSize, o.Batch.MaxExportBatchSize = 1024, 16
			}},
		{"APISIX's 2.13 example", `plugin_attr:
  opentelemetry:
    resource:
      service.name: APISIX
      tenant.id: business_id
    collector:
      address: "127.0.0.1:4317"
    batch_span_processor:
      drop_on_queue_full: false
      max_queue_size: 6
      batch_timeout: 2
      inactive_timeout: 1
      max_export_batch_size: 2`,
			func(o *OpenTelemetryAttr) {
				o.Resource = []KeyValue{{Key: "service.name", Value: "APISIX"}, {Key: "tenant.id", Value: "business_id"}}
				o.Collector.Address = "127.0.0.1:4317"
				o.Batch = OTelBatchProcessor{MaxQueueSize: 6, BatchTimeout: 2 * time.Second, InactiveTimeout: time.Second, MaxExportBatchSize: 2}
			}},
		{"scalar kinds", "plugin_attr: {opentelemetry: {resource: {a: 1, b: 2.5, c: true, d: x}}}",
			func(o *OpenTelemetryAttr) {
				o.Resource = []KeyValue{{"a", 1.0}, {"b", 2.5}, {"c", true}, {"d", "x"}}
			}},
		{"null resource", "plugin_attr: {opentelemetry: {resource: }}", func(o *OpenTelemetryAttr) { o.Resource = []KeyValue{} }},
		{"https and headers", `plugin_attr: {opentelemetry: {trace_id_source: x-request-id, collector: {address: "https://otel.example:4318", request_timeout: 10, request_headers: {Authorization: "Bearer t", X-Retry: 3, X-On: true}}}}`,
			func(o *OpenTelemetryAttr) {
				o.TraceIDSource = TraceIDFromRequestID
				o.Collector = OTelCollector{Address: "https://otel.example:4318", RequestTimeout: 10 * time.Second,
					RequestHeaders: []KeyValue{{"Authorization", "Bearer t"}, {"X-Retry", "3"}, {"X-On", "true"}}}
			}},
		{"fractional timeouts", "plugin_attr: {opentelemetry: {batch_span_processor: {batch_timeout: 0.25, inactive_timeout: 0.5}}}",
			func(o *OpenTelemetryAttr) {
				o.Batch.BatchTimeout, o.Batch.InactiveTimeout = 250*time.Millisecond, 500*time.Millisecond
			}},
		{"set_ngx_var false", "plugin_attr: {opentelemetry: {set_ngx_var: false}}", func(*OpenTelemetryAttr) {}},
		{"empty section", "plugin_attr:", func(*OpenTelemetryAttr) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOver(Default(), []byte(tt.yaml), "f.yaml")
			if err != nil {
				t.Fatal(err)
			}
			want := wantDefaultPluginAttr().OpenTelemetry
			tt.want(&want)
			if !reflect.DeepEqual(got.PluginAttr.OpenTelemetry, want) {
				t.Fatalf("got  %+v\nwant %+v", got.PluginAttr.OpenTelemetry, want)
			}
		})
	}
}

func TestPluginAttrRejects(t *testing.T) {
	const o = "plugin_attr: {opentelemetry: "
	tests := []struct{ name, yaml, want string }{
		{"unknown plugin", "plugin_attr: {zipkin: {}}", `1: plugin_attr.zipkin: unknown key; known keys here are opentelemetry, prometheus`},
		{"prometheus", "plugin_attr: {prometheus: {export_uri: /m}}", `1: plugin_attr.prometheus: gw reads the metrics export server from the top-level prometheus section`},
		{"not a mapping", "plugin_attr: [1]", `1: plugin_attr: must be a mapping of keys, got a list`},
		{"unknown key", o + "{sampler: x}}", `1: plugin_attr.opentelemetry.sampler: unknown key`},
		{"trace_id_source", o + "{trace_id_source: uuid}}", `1: plugin_attr.opentelemetry.trace_id_source: must be one of x-request-id, random, got "uuid"`},
		{"resource list", o + "{resource: [a]}}", `1: plugin_attr.opentelemetry.resource: must be a mapping of names to strings, numbers or booleans, got a list`},
		{"resource nested", o + "{resource: {a: {b: c}}}}", `1: plugin_attr.opentelemetry.resource.a: must be a string, a number or a boolean, got a mapping`},
		{"resource infinite", o + "{resource: {a: .inf}}}", `1: plugin_attr.opentelemetry.resource.a: must be a string, a finite number or a boolean, got .inf`},
		{"collector unknown", o + "{collector: {endpoint: x}}}", `1: plugin_attr.opentelemetry.collector.endpoint: unknown key`},
		{"address no port", o + "{collector: {address: collector}}}", `1: plugin_attr.opentelemetry.collector.address: must be "host:port" (an http:// or https:// prefix allowed), got "collector"`},
		{"address port zero", o + "{collector: {address: \"a:0\"}}}", `1: plugin_attr.opentelemetry.collector.address: must be "host:port"`},
		{"address path", o + "{collector: {address: \"http://a:1/x\"}}}", `1: plugin_attr.opentelemetry.collector.address: must be "host:port"`},
		{"address empty", o + "{collector: {address: \"\"}}}", `1: plugin_attr.opentelemetry.collector.address: must not be empty`},
		{"timeout zero", o + "{collector: {request_timeout: 0}}}", `1: plugin_attr.opentelemetry.collector.request_timeout: must be a whole number of seconds from 1 to 3600, got 0`},
		{"timeout fraction", o + "{collector: {request_timeout: 1.5}}}", `1: plugin_attr.opentelemetry.collector.request_timeout: must be a whole number of seconds from 1 to 3600, got 1.5`},
		{"timeout string", o + "{collector: {request_timeout: 3s}}}", `1: plugin_attr.opentelemetry.collector.request_timeout: must be a whole number of seconds from 1 to 3600, got "3s"`},
		{"header name", o + "{collector: {request_headers: {\"a b\": x}}}}", `1: plugin_attr.opentelemetry.collector.request_headers.a b: must be a header field name`},
		{"header value newline", o + "{collector: {request_headers: {a: \"x\\ny\"}}}}", `1: plugin_attr.opentelemetry.collector.request_headers.a: must not hold a line break or NUL`},
		{"queue zero", o + "{batch_span_processor: {max_queue_size: 0}}}", `1: plugin_attr.opentelemetry.batch_span_processor.max_queue_size: must be an integer from 1 to 65536, got 0`},
		{"batch over queue", o + "{batch_span_processor: {max_queue_size: 8, max_export_batch_size: 16}}}", `1: plugin_attr.opentelemetry.batch_span_processor.max_export_batch_size: max_export_batch_size 16 is larger than max_queue_size 8`},
		{"batch over default queue", o + "{batch_span_processor: {max_export_batch_size: 4096}}}", `1: plugin_attr.opentelemetry.batch_span_processor.max_export_batch_size: max_export_batch_size 4096 is larger than max_queue_size 2048`},
		{"inactive negative", o + "{batch_span_processor: {inactive_timeout: -1}}}", `1: plugin_attr.opentelemetry.batch_span_processor.inactive_timeout: must be a number of seconds (0.5, 2) more than 0 and at most 3600, got -1`},
		{"batch timeout huge", o + "{batch_span_processor: {batch_timeout: 4000}}}", `1: plugin_attr.opentelemetry.batch_span_processor.batch_timeout: must be a number of seconds`},
		{"drop not bool", o + "{batch_span_processor: {drop_on_queue_full: yes}}}", `1: plugin_attr.opentelemetry.batch_span_processor.drop_on_queue_full: must be true or false, got "yes"`},
		{"bsp unknown", o + "{batch_span_processor: {export_timeout: 1}}}", `1: plugin_attr.opentelemetry.batch_span_processor.export_timeout: unknown key`},
		{"set_ngx_var", o + "{set_ngx_var: true}}", `1: plugin_attr.opentelemetry.set_ngx_var: true is not supported yet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOver(Default(), []byte(tt.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("accepted %s", tt.yaml)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "f.yaml:"+tt.want) {
				t.Fatalf("error %q\nwant one line starting f.yaml:%s", err, tt.want)
			}
		})
	}
}

func TestCollectorURL(t *testing.T) {
	for address, want := range map[string]string{
		"127.0.0.1:4318":         "http://127.0.0.1:4318/v1/traces",
		"http://[::1]:4318":      "http://[::1]:4318/v1/traces",
		"https://otel.example:1": "https://otel.example:1/v1/traces",
	} {
		if got := (OTelCollector{Address: address}).URL(); got != want {
			t.Errorf("URL of %q = %q, want %q", address, got, want)
		}
	}
}

// The master hands workers the Config as JSON: the section must come back the same.
func TestPluginAttrSurvivesJSON(t *testing.T) {
	c, err := parseOver(Default(), []byte("plugin_attr: {opentelemetry: {resource: {a: 1.5, b: true, c: x}, collector: {request_headers: {X-A: 3}}, batch_span_processor: {batch_timeout: 0.25}}}"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.PluginAttr, c.PluginAttr) {
		t.Fatalf("through JSON %+v\nwant %+v", back.PluginAttr, c.PluginAttr)
	}
}
