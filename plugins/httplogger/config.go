package httplogger

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"gw/plugins"
	"gw/plugins/batch"
	"gw/plugins/logentry"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "http-logger"

// Priority is APISIX's.
const Priority = 410

func init() { plugins.Register(plugin{batch.MasterPart{Plugin: Name}}) }

// plugin is http-logger as the host sees it; its instance is a handler (handler.go). The
// embedded MasterPart renders its drops on the master's metrics page.
type plugin struct{ batch.MasterPart }

var (
	_ plugins.Plugin        = plugin{}
	_ plugins.MetadataOwner = plugin{}
	_ plugins.SegmentOwner  = plugin{}
	_ plugins.MasterPart    = plugin{}
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

func (plugin) MetadataSchema() []byte { return []byte(logentry.MetadataSchema) }

func (plugin) Segment() *plugins.SegmentSpec { return batch.SegmentSpec(Name) }

// Config is one http-logger configuration, decoded and defaulted; immutable once Parse
// returns it.
type Config struct {
	URI        string
	AuthHeader string
	Timeout    time.Duration
	// NewLine is concat_method "new_line": entries a line each, not a JSON array.
	NewLine   bool
	SSLVerify bool
	Entry     logentry.Options
	// Format is the route's log_format, nil without one.
	Format *logentry.Format
	Batch  batch.Config
}

const fields = "uri, auth_header, timeout, log_format, include_req_body, include_resp_body, concat_method, ssl_verify, " + batch.Fields

// Parse decodes one http-logger configuration strictly, with APISIX's defaults
// (timeout 3 s, concat_method json, ssl_verify false, the batch processor's).
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{Timeout: 3 * time.Second, Batch: batch.Defaults()}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		var err error
		if taken, err := c.Batch.Take(m); taken {
			return err
		}
		switch m.Name {
		case "uri":
			if c.URI, err = m.NonEmptyString(); err == nil {
				err = checkURI(c.URI)
			}
		case "auth_header":
			c.AuthHeader, err = m.AnyString()
		case "timeout":
			var n int64
			n, err = m.IntIn(1, 86400)
			c.Timeout = time.Duration(n) * time.Second
		case "log_format":
			c.Format, err = logentry.ParseFormat(m)
		case "include_req_body":
			c.Entry.RequestBody, err = m.Bool()
		case "include_resp_body":
			c.Entry.ResponseBody, err = m.Bool()
		case "include_req_body_expr", "include_resp_body_expr", "request_header_keys":
			err = fmt.Errorf("%s: is not supported yet", m.Name)
		case "concat_method":
			var method string
			method, err = m.OneOf("json", "new_line")
			c.NewLine = method == "new_line"
		case "ssl_verify":
			c.SSLVerify, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s", m.Name, fields)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if c.URI == "" {
		return nil, errors.New("uri: required")
	}
	return c, nil
}

// checkURI accepts an http or https URL with a host: what the processor can POST to.
func checkURI(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("uri: must be an http:// or https:// URL with a host, got %q", s)
	}
	return nil
}
