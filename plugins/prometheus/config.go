package prometheus

import (
	"encoding/json"
	"fmt"

	"gw/plugins"
	"gw/plugins/pluginconf"
	"gw/shm"
)

// Name is the key under a route's "plugins" object.
const Name = "prometheus"

// Priority places prometheus in the chain as APISIX does (higher runs first).
const Priority = 500

func init() { plugins.Register(plugin{}) }

// plugin is prometheus as the host sees it: a route's recorder (handler.go) counts into
// the metrics segment; in each worker a connection observer counts its connections into
// it (conns.go); in the master a part of its own retires the areas of workers that are
// gone and renders the export server's page (master.go).
type plugin struct{}

var (
	_ plugins.Plugin        = plugin{}
	_ plugins.RequestKeeper = plugin{}
	_ plugins.SegmentOwner  = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// KeepsRequest: prometheus only counts.
func (plugin) KeepsRequest() bool { return true }

// Segment is the metrics table's: sized by prometheus.max_series within shm.metrics.
func (plugin) Segment() *plugins.SegmentSpec { return segmentSpec }

var segmentSpec = &plugins.SegmentSpec{
	Layout:    SegmentLayout,
	Size:      SegmentSize,
	Init:      InitSegment,
	FreeBytes: freeBytes,
}

// freeBytes is the room left for label sets, for apisix_shared_dict_free_space_bytes.
func freeBytes(seg *shm.Segment) int {
	t, err := tableFor(seg)
	if err != nil {
		return 0
	}
	return t.FreeBytes()
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
	c := &Config{}
	// Each, not Members: a member's error is reported before anything wrong after it,
	// as prometheus always has.
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) (err error) {
		switch m.Name {
		case "prefer_name":
			c.PreferName, err = m.Bool()
		case "disable":
			c.Disable, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field", m.Name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
