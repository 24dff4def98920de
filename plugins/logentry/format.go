package logentry

import (
	"encoding/json"
	"fmt"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
	"gw/plugins/vars"
)

// Format is a log_format, compiled: each key with its text or its variable, in the
// order written. It is immutable and safe for concurrent use.
type Format struct {
	fields []field
}

type field struct {
	key  []byte // the key as a JSON string, quotes included
	text []byte // a literal value as a JSON string; nil for a variable
	v    conf.Var
}

// ParseFormat reads a log_format member: an object whose values are strings, each a
// literal or, starting with '$', a variable name (APISIX's log-util reads "$host" as the
// variable host, and "host: $host" as text). A variable gw does not know is refused.
func ParseFormat(m pluginconf.Member) (*Format, error) {
	f := &Format{}
	err := pluginconf.Compact.Each(m.Value, func(item pluginconf.Member) error {
		value, err := item.AnyString()
		if err != nil {
			return fmt.Errorf("%s.%w", m.Name, err)
		}
		fl := field{key: appendString(nil, item.Name)}
		if len(value) > 0 && value[0] == '$' {
			// The entry is made in the log phase, once the response is known: its
			// variables ($status, $sent_http_<name>) are there, as in nginx's log.
			if fl.v, err = conf.ParseResponseVar(value[1:]); err != nil {
				return fmt.Errorf("%s.%s: %w", m.Name, item.Name, err)
			}
		} else {
			fl.text = appendString(nil, value)
		}
		f.fields = append(f.fields, fl)
		return nil
	})
	if err != nil {
		if m.Value[0] != '{' {
			return nil, fmt.Errorf("%s: must be an object, got %s", m.Name, m.Show())
		}
		return nil, err
	}
	return f, nil
}

// DefaultFormat is APISIX's default log_format of plugin_metadata (log-util's
// metadata_schema_log_format): a metadata object without log_format has it.
var DefaultFormat = func() *Format {
	f, err := ParseFormat(pluginconf.Member{Name: "log_format",
		Value: json.RawMessage(`{"host":"$host","@timestamp":"$time_iso8601","client_ip":"$remote_addr"}`)})
	if err != nil {
		panic("BUG: logentry: the default log_format: " + err.Error())
	}
	return f
}()

// Append appends the entry f makes of the request to dst: each key with its text or its
// variable's value (a key whose variable has no value is left out, as Lua's nil), then
// route_id and service_id as APISIX adds them.
func (f *Format) Append(dst []byte, c *plugins.Ctx) []byte {
	r := c.VarsRequest()
	dst = append(dst, '{')
	first := true
	var scratch [64]byte
	for i := range f.fields {
		fl := &f.fields[i]
		var value []byte
		if fl.text == nil {
			v, ok := vars.Value(&r, &fl.v, scratch[:0])
			if !ok {
				continue
			}
			value = v
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, fl.key...)
		dst = append(dst, ':')
		if fl.text != nil {
			dst = append(dst, fl.text...)
		} else {
			dst = appendString(dst, value)
		}
	}
	if c.Route != nil && c.Route.ID != "" {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `"route_id":`...)
		dst = appendString(dst, c.Route.ID)
		if c.Route.ServiceID != "" {
			dst = append(dst, `,"service_id":`...)
			dst = appendString(dst, c.Route.ServiceID)
		}
	}
	return append(dst, '}')
}

// Metadata is a logger's plugin_metadata: {"log_format": {...}}, with the create_time and
// update_time the Admin API adds.
type Metadata struct {
	// Format is the log_format, DefaultFormat when the metadata has none.
	Format *Format
}

// ParseMetadata reads a logger's plugin_metadata strictly.
func ParseMetadata(raw json.RawMessage) (*Metadata, error) {
	md := &Metadata{Format: DefaultFormat}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		var err error
		switch m.Name {
		case "log_format":
			md.Format, err = ParseFormat(m)
		case "create_time", "update_time":
			if _, ok := pluginconf.Integer(m.Value); !ok {
				err = fmt.Errorf("%s: must be an integer, got %s", m.Name, m.Show())
			}
		default:
			err = fmt.Errorf("%s: unknown field; known fields: log_format", m.Name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return md, nil
}

// MetadataSchema is the JSON Schema of a logger's plugin_metadata.
const MetadataSchema = `{"type":"object","properties":{"log_format":{"type":"object","additionalProperties":{"type":"string"}}},"additionalProperties":false}`
