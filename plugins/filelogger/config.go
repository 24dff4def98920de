package filelogger

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gw/plugins"
	"gw/plugins/batch"
	"gw/plugins/logentry"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "file-logger"

// Priority is APISIX's.
const Priority = 399

func init() { plugins.Register(plugin{batch.MasterPart{Plugin: Name}}) }

// plugin is file-logger as the host sees it; the embedded MasterPart renders its drops.
type plugin struct{ batch.MasterPart }

var (
	_ plugins.Plugin        = plugin{}
	_ plugins.MetadataOwner = plugin{}
	_ plugins.SegmentOwner  = plugin{}
	_ plugins.RequestKeeper = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

func (plugin) ValidateMetadata(raw json.RawMessage) error {
	_, err := logentry.ParseMetadata(raw)
	return err
}

func (plugin) MetadataSchema() []byte        { return []byte(logentry.MetadataSchema) }
func (plugin) Segment() *plugins.SegmentSpec { return batch.SegmentSpec(Name) }
func (plugin) KeepsRequest() bool            { return true }

// Config is one file-logger configuration, decoded.
type Config struct {
	// Path is the file, relative to the gateway's prefix unless absolute.
	Path   string
	Entry  logentry.Options
	Format *logentry.Format
}

// batchConfig is the processor a file-logger runs with: APISIX's has none (it writes in
// the log phase), so entries reach the file within a second.
var batchConfig = batch.Config{Name: "file logger", BatchMaxSize: 1000, InactiveTimeout: time.Second,
	BufferDuration: time.Second, MaxRetryCount: 0}

// Parse decodes one file-logger configuration strictly.
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		var err error
		switch m.Name {
		case "path":
			c.Path, err = m.NonEmptyString()
		case "log_format":
			c.Format, err = logentry.ParseFormat(m)
		case "include_req_body":
			c.Entry.RequestBody, err = m.Bool()
		case "include_resp_body", "include_req_body_expr", "include_resp_body_expr", "match":
			err = fmt.Errorf("%s: is not supported yet", m.Name)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: path, log_format, include_req_body", m.Name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if c.Path == "" {
		return nil, errors.New("path: required")
	}
	return c, nil
}
