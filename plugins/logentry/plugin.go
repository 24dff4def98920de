package logentry

import (
	"encoding/json"

	"gw/plugins"
	"gw/plugins/batch"
)

// PluginPart is what the loggers' plugin types have in common, embedded in each: their
// plugin_metadata (log_format), their drops in shared memory and on the master's
// metrics page (batch.MasterPart), and that they only read the request.
type PluginPart struct{ batch.MasterPart }

var (
	_ plugins.MetadataOwner = PluginPart{}
	_ plugins.SegmentOwner  = PluginPart{}
	_ plugins.RequestKeeper = PluginPart{}
)

// ValidateMetadata checks the logger's plugin_metadata (ParseMetadata).
func (PluginPart) ValidateMetadata(raw json.RawMessage) error {
	_, err := ParseMetadata(raw)
	return err
}

// MetadataSchema is the plugin_metadata's JSON Schema.
func (PluginPart) MetadataSchema() []byte { return []byte(MetadataSchema) }

// Segment is the shared memory where the logger counts its drops.
func (p PluginPart) Segment() *plugins.SegmentSpec { return batch.SegmentSpec(p.Plugin) }

// KeepsRequest: a logger only reads the request.
func (PluginPart) KeepsRequest() bool { return true }
