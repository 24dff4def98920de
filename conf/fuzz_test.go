package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fuzz targets of the other Admin API decoders and of the config loader's round trip;
// FuzzDecodeRoute, FuzzDecodeConsumer, FuzzParseVars and FuzzParse live beside their
// table tests.

// checkDecoder is the property every Admin API decoder has: no panic, every rejection an
// *ObjectError naming the field, and an accepted object that encodes to JSON which
// decodes to the same object.
func checkDecoder[T any](t *testing.T, decode func([]byte) (*T, error), data []byte) *T {
	t.Helper()
	v, err := decode(data)
	if err != nil {
		if v != nil {
			t.Fatalf("both an object and an error: %v", err)
		}
		if _, ok := errors.AsType[*ObjectError](err); !ok {
			t.Fatalf("error %v is %T, not *ObjectError", err, err)
		}
		return nil
	}
	encoded, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s decodes to an object that does not encode: %v", data, err)
	}
	again, err := decode(encoded)
	if err != nil {
		t.Fatalf("%s\nre-encoded as %s\nno longer decodes: %v", data, encoded, err)
	}
	if !reflect.DeepEqual(v, again) {
		t.Fatalf("%s\nre-encoded as %s\ndecodes to %s\nnot %s", data, encoded, asJSON(again), asJSON(v))
	}
	return v
}

// TestDecodeRouteVarsErrors pins what FuzzDecodeRoute found: a vars expression that does
// not compile is refused with a *VarsError, not an *ObjectError.
func TestDecodeRouteVarsErrors(t *testing.T) {
	for _, body := range []string{
		`{"uri":"/","service_id":1,"vars":[[]]}`,
		`{"uri":"/a","plugins":{},"vars":[["arg_a","=","1"]]}`,
	} {
		_, err := DecodeRoute([]byte(body))
		if _, ok := errors.AsType[*VarsError](err); !ok {
			t.Errorf("DecodeRoute(%s) = %v (%T), want a *VarsError", body, err, err)
		}
	}
}

func FuzzDecodeUpstream(f *testing.F) {
	for _, tc := range upstreamAccepts {
		f.Add([]byte(tc.body))
	}
	for _, tc := range upstreamRejects {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u := checkDecoder(t, DecodeUpstream, data)
		if u == nil {
			return
		}
		// What the decoder accepts, the worker builds: Normalize refuses none of it.
		if _, err := u.Normalize(nil); err != nil {
			t.Fatalf("%s decodes but does not normalise: %v", data, err)
		}
		// Normalize fills the defaults on its own copy: they must be values the
		// decoder accepts, and filling them twice must change nothing.
		u.ApplyDefaults()
		withDefaults := mustMarshal(t, u)
		if _, err := DecodeUpstream(withDefaults); err != nil {
			t.Fatalf("%s with defaults is %s, which is rejected: %v", data, withDefaults, err)
		}
		u.ApplyDefaults()
		if twice := mustMarshal(t, u); string(twice) != string(withDefaults) {
			t.Fatalf("defaults applied twice: %s, then %s", withDefaults, twice)
		}
	})
}

func FuzzDecodeService(f *testing.F) {
	for _, tc := range serviceAccepts {
		f.Add([]byte(tc.body))
	}
	for _, tc := range serviceRejects {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, DecodeService, data)
	})
}

func FuzzDecodePluginConfig(f *testing.F) {
	for _, body := range []string{
		`{"id":"1","plugins":{}}`,
		`{"id":7,"plugins":{"limit-count":{"count":1,"time_window":1}}}`,
		`{"id":"pc-1","name":"n","desc":"d","labels":{"env":"prod"},"plugins":{"key-auth":{}},"create_time":1,"update_time":2}`,
		`{"id":"a","plugins":{"p":{ "x" : 1 }}}`,
		`{"id":`, `[]`, `{"id":"1"}`, `{"plugins":{}}`, `{"id":"1","plugins":[]}`, `{"id":"a/b","plugins":{}}`,
		`{"id":"1","plugins":{},"name":""}`, `{"id":"1","plugins":{},"labels":{"k":"a b"}}`,
		`{"id":"1","plugins":{},"create_time":"1"}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := checkDecoder(t, DecodePluginConfig, data)
		if p != nil && (p.ID == "" || p.Plugins == nil) {
			t.Fatalf("%s accepted without id or plugins: %+v", data, p)
		}
	})
}

func FuzzDecodeGlobalRule(f *testing.F) {
	for _, body := range []string{
		`{"id":"1","plugins":{}}`,
		`{"id":3,"plugins":{"prometheus":{}}}`,
		`{"id":"g","plugins":{},"create_time":1,"update_time":2}`,
		`{`, `null`, `{"id":"1"}`, `{"plugins":{}}`, `{"id":"1","plugins":"x"}`, `{"id":0,"plugins":{}}`,
		`{"id":"1","plugins":{},"name":"n"}`, `{"id":"1","plugins":{},"update_time":1.5}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := checkDecoder(t, DecodeGlobalRule, data)
		if g != nil && (g.ID == "" || g.Plugins == nil) {
			t.Fatalf("%s accepted without id or plugins: %+v", data, g)
		}
	})
}

// FuzzParseRoundTrip checks that the loader is a fixed point: a config it accepts, written
// back out (as JSON, which is YAML), loads to the same Config. A value the loader
// normalises into something it would then refuse, or read differently, fails here.
func FuzzParseRoundTrip(f *testing.F) {
	f.Add(defaultYAML)
	for _, seed := range []string{
		"", "worker_processes: 2", "worker_processes: auto", "node_listen: [9080, '[::1]:80', localhost:81]",
		"admin:\n  listen: 0.0.0.0:9180\n  keys: [{name: a, key: b}, {name: v, key: c, role: viewer}]\n  allow: [10.0.0.1, '::ffff:10.0.0.0/104']\n",
		"worker_shutdown_timeout: 1m30s", "worker_shutdown_timeout: 240",
		"access_log: {enabled: true, path: /tmp/a.log, format: json, buffer: 64k, flush_interval: 250ms}",
		"shm: {limit_count: 1m, limit_count_on_full: reject, metrics: 65536}",
		"prometheus: {enabled: false, export_addr: '[::1]:9091', export_uri: /m, max_series: 10}",
		"router: {http: radixtree_uri_with_parameter}", "data_dir: \"d\\tx\"", "error_log_level: debug",
		"plugin_attr: {opentelemetry: {resource: {a: 1.5, b: true, c: x}, collector: {address: 'https://c:1', request_headers: {X-A: 3}}, batch_span_processor: {batch_timeout: 0.25}}}",
		"worker_processes: ${{W:=2}}", "data_dir: '${{D:=/srv}}/x${{E:=}}'", "access_log: {enabled: '${{A:=false}}'}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		written := writeConfig(t, c)
		again, err := Parse(written, "written.yaml")
		if err != nil {
			t.Fatalf("%q loads, but written back as %s it does not: %v", data, written, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("%q loads to\n%s\nwhich loads back to\n%s", data, written, writeConfig(t, again))
		}
	})
}

// writeConfig renders c as a config file: JSON (which is YAML) with every duration and
// "auto" written the way the loader reads them, and unset lists left out.
func writeConfig(t *testing.T, c *Config) []byte {
	t.Helper()
	doc := configValue(reflect.ValueOf(*c)).(map[string]any)
	if c.WorkerProcesses == 0 {
		doc["worker_processes"] = "auto"
	}
	return mustMarshal(t, doc)
}

var durationType = reflect.TypeFor[time.Duration]()

func configValue(v reflect.Value) any {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Type() == reflect.TypeFor[OpenTelemetryAttr]():
		// config.yaml spells it otherwise than its JSON (seconds, ordered mappings).
		b, err := openTelemetryYAML(v.Interface().(OpenTelemetryAttr))
		if err != nil {
			panic(err)
		}
		return json.RawMessage(b)
	case v.Kind() == reflect.Struct:
		fields := map[string]any{}
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			f := v.Field(i)
			if name == "" || name == "-" || (f.Kind() == reflect.Slice && f.IsNil()) {
				continue
			}
			fields[name] = configValue(f)
		}
		return fields
	case v.Kind() == reflect.Slice:
		items := make([]any, v.Len())
		for i := range items {
			items[i] = configValue(v.Index(i))
		}
		return items
	}
	return v.Interface()
}

// openTelemetryYAML writes plugin_attr.opentelemetry as config.yaml spells it (seconds as
// numbers, the mappings as objects in file order); the JSON the master hands workers is
// the struct's own.
func openTelemetryYAML(o OpenTelemetryAttr) ([]byte, error) {
	var b bytes.Buffer
	str := func(s string) { q, _ := json.Marshal(s); b.Write(q) }
	mapping := func(kvs []KeyValue) {
		b.WriteByte('{')
		for i, kv := range kvs {
			if i > 0 {
				b.WriteByte(',')
			}
			str(kv.Key)
			b.WriteByte(':')
			v, _ := json.Marshal(kv.Value)
			b.Write(v)
		}
		b.WriteByte('}')
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	bsp := o.Batch
	b.WriteString(`{"trace_id_source":`)
	str(o.TraceIDSource)
	b.WriteString(`,"resource":`)
	mapping(o.Resource)
	b.WriteString(`,"collector":{"address":`)
	str(o.Collector.Address)
	b.WriteString(`,"request_timeout":` + secs(o.Collector.RequestTimeout) + `,"request_headers":`)
	mapping(o.Collector.RequestHeaders)
	fmt.Fprintf(&b, `},"batch_span_processor":{"drop_on_queue_full":%t,"max_queue_size":%d,"batch_timeout":%s,"inactive_timeout":%s,"max_export_batch_size":%d}}`,
		bsp.DropOnQueueFull, bsp.MaxQueueSize, secs(bsp.BatchTimeout), secs(bsp.InactiveTimeout), bsp.MaxExportBatchSize)
	return b.Bytes(), nil
}
