package prometheus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"gw/plugins"
)

// Name is the key under a route's "plugins" object.
const Name = "prometheus"

// Priority places prometheus in the chain as APISIX does (higher runs first).
const Priority = 500

func init() {
	plugins.Register(plugins.Plugin{
		Name:     Name,
		Priority: Priority,
		Validate: func(raw json.RawMessage) error {
			_, err := Parse(raw)
			return err
		},
		Build: build,
		Segment: &plugins.SegmentSpec{
			Layout: SegmentLayout,
			Size:   SegmentSize,
			Init:   InitSegment,
		},
	})
}

// Config is one prometheus configuration. It is immutable once Parse returns it.
type Config struct {
	// PreferName labels series with the route's and service's names instead of their ids
	// (falling back to the id when an object has no name).
	PreferName bool `json:"prefer_name"`
	// Disable turns the plugin off on this route while keeping its configuration.
	Disable bool `json:"disable,omitempty"`
}

// Parse decodes one prometheus configuration strictly. The error names the offending
// field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("configuration must be a JSON object, got %s", show(raw))
	}
	c := &Config{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: appears twice; keep one", name)
		}
		seen[name] = true
		switch name {
		case "prefer_name":
			c.PreferName, err = boolean(name, v)
		case "disable":
			c.Disable, err = boolean(name, v)
		case "_meta":
			if v[0] != '{' {
				err = fmt.Errorf("_meta: must be an object, got %s", show(v))
			}
		default:
			err = fmt.Errorf("%s: unknown field", name)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the object")
	}
	return c, nil
}

func boolean(name string, v json.RawMessage) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: must be true or false, got %s", name, show(v))
}

// show renders a raw value for "got ..." in messages, cut short so an error stays one line.
func show(v json.RawMessage) string {
	const max = 40
	var compact bytes.Buffer
	s := strings.TrimSpace(string(v))
	if json.Compact(&compact, v) == nil {
		s = compact.String()
	}
	if s == "" {
		return "nothing"
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "..."
	}
	return s
}
