package encoding

import (
	"encoding/json"
	"fmt"

	"gw/plugins/pluginconf"
)

// Common is the configuration gzip and brotli share, APISIX's fields of both schemas.
type Common struct {
	// Types are the media types compressed (Content-Type without its parameters); nil
	// is "*": every type.
	Types []string
	// MinLength is the shortest body compressed.
	MinLength int64
	// HTTPVersion is the lowest request version served compressed: 11 (HTTP/1.1) or 10.
	HTTPVersion int
	// Vary adds Vary: Accept-Encoding to the responses that may be compressed.
	Vary bool
}

// DefaultCommon is APISIX's defaults for the shared fields.
func DefaultCommon() Common {
	return Common{Types: []string{"text/html"}, MinLength: 20, HTTPVersion: 11}
}

// CommonFields names the shared fields, for a plugin's unknown-field message.
const CommonFields = "types, min_length, http_version, vary"

// Decode reads m into c when it is a shared field (or _meta, which both accept and
// ignore) and reports whether it was; the error names the field and the value.
func (c *Common) Decode(m pluginconf.Member) (known bool, err error) {
	switch m.Name {
	case "types":
		c.Types, err = decodeTypes(m)
	case "min_length":
		c.MinLength, err = m.PositiveInt(1 << 62)
	case "http_version":
		switch string(m.Value) {
		case "1.1":
			c.HTTPVersion = 11
		case "1.0", "1":
			c.HTTPVersion = 10
		default:
			err = fmt.Errorf("%s: must be 1.1 or 1.0, got %s", m.Name, m.Show())
		}
	case "vary":
		c.Vary, err = m.Bool()
	case "_meta":
		err = m.Object()
	default:
		return false, nil
	}
	return true, err
}

func decodeTypes(m pluginconf.Member) ([]string, error) {
	if string(m.Value) == `"*"` {
		return nil, nil
	}
	var list []string
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &list) != nil || len(list) == 0 {
		return nil, fmt.Errorf(`%s: must be "*" or a non-empty array of media types, got %s`, m.Name, m.Show())
	}
	for i, t := range list {
		if t == "" {
			return nil, fmt.Errorf("%s[%d]: must not be empty", m.Name, i)
		}
	}
	return list, nil
}
