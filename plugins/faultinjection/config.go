package faultinjection

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "fault-injection"

// Priority places fault-injection in the chain as APISIX does (higher runs first): ahead
// of every other plugin of gw's but real-ip, as APISIX runs it in the rewrite phase.
const Priority = 11000

// MaxDelay is the longest delay gw accepts. APISIX has no maximum; a delay longer than any
// client waits tests nothing and holds a connection through a graceful stop.
const MaxDelay = time.Hour

func init() { plugins.Register(plugin{}) }

// plugin is fault-injection as the host sees it; its instance is the route's Config
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is one fault-injection configuration, compiled. It is immutable once Parse
// returns it and safe to share between goroutines. Abort and Delay are nil when not set.
type Config struct {
	Abort *Abort
	Delay *Delay
}

// When is the condition shared by abort and delay: the request is sampled at Percentage
// (always when it is -1), and, given Vars, at least one of the expressions holds.
type When struct {
	Percentage int
	// Vars are the expressions, any one of which must hold; HasVars tells an empty list
	// (which, as in APISIX, nothing satisfies) from none.
	Vars    []*conf.Expr
	HasVars bool
}

// Abort answers the request itself.
type Abort struct {
	When
	Status int
	// Body is nil when not set; HasBodyVars says it names variables, expanded per request.
	Body        *conf.Template
	bodyText    []byte // Body's text, when it has no variables
	HasBodyVars bool
	Headers     []header
}

type header struct {
	name  []byte
	value conf.Template
}

// Delay holds the request for Duration before the rest of the chain runs.
type Delay struct {
	When
	Duration time.Duration
}

// Values in a body or header read an unknown variable as empty, as APISIX's resolve_var
// does.
var textSyntax = conf.TemplateSyntax{UnknownIsEmpty: true}

// Parse decodes one fault-injection configuration strictly. The error names the
// offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	for _, m := range members {
		switch m.Name {
		case "abort":
			c.Abort, err = parseAbort(m.Value)
		case "delay":
			c.Delay, err = parseDelay(m.Value)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: abort, delay", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.Abort == nil && c.Delay == nil {
		return nil, errors.New("configuration must set abort, delay or both")
	}
	return c, nil
}

func parseAbort(raw json.RawMessage) (*Abort, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	a := &Abort{When: When{Percentage: -1}}
	for _, m := range members {
		switch m.Name {
		case "http_status":
			var code int64
			code, err = m.IntIn(200, 599)
			a.Status = int(code)
		case "body":
			var s string
			if s, err = m.AnyString(); err == nil {
				var t conf.Template
				if t, err = conf.ParseTemplate(s, textSyntax); err != nil {
					err = fmt.Errorf("body: %w", err)
				} else {
					a.Body = &t
					a.HasBodyVars = hasVars(&t)
					a.bodyText = []byte(s)
				}
			}
		case "headers":
			a.Headers, err = parseHeaders(m)
		case "percentage", "vars":
			err = a.When.parse(m)
		default:
			err = fmt.Errorf("%s: unknown field; known fields: http_status, body, headers, percentage, vars", m.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("abort.%w", err)
		}
	}
	if a.Status == 0 {
		return nil, errors.New("abort.http_status: is required (the status of the injected answer)")
	}
	return a, nil
}

func parseDelay(raw json.RawMessage) (*Delay, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	d := &Delay{When: When{Percentage: -1}, Duration: -1}
	for _, m := range members {
		switch m.Name {
		case "duration":
			d.Duration, err = parseDuration(m)
		case "percentage", "vars":
			err = d.When.parse(m)
		default:
			err = fmt.Errorf("%s: unknown field; known fields: duration, percentage, vars", m.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("delay.%w", err)
		}
	}
	if d.Duration < 0 {
		return nil, errors.New("delay.duration: is required (seconds to hold the request)")
	}
	return d, nil
}

// parseDuration reads a JSON number of seconds from 0 to MaxDelay.
func parseDuration(m pluginconf.Member) (time.Duration, error) {
	v := strings.TrimSpace(string(m.Value))
	f, err := strconv.ParseFloat(v, 64)
	if v == "" || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("duration: must be a number of seconds, got %s", m.Show())
	}
	if f < 0 || f > MaxDelay.Seconds() {
		return 0, fmt.Errorf("duration: must be from 0 to %g seconds, got %s", MaxDelay.Seconds(), m.Show())
	}
	return time.Duration(f * float64(time.Second)), nil
}

func (w *When) parse(m pluginconf.Member) error {
	var err error
	if m.Name == "percentage" {
		var p int64
		p, err = m.IntIn(0, 100)
		w.Percentage = int(p)
		return err
	}
	var items []json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &items) != nil {
		return fmt.Errorf("vars: must be an array of vars expressions, got %s", m.Show())
	}
	if len(items) > 20 {
		return fmt.Errorf("vars: must have at most 20 expressions, got %d", len(items))
	}
	w.HasVars = true
	for i, item := range items {
		if item[0] != '[' {
			return fmt.Errorf("vars: item %d must be an array (a vars expression), got %s", i+1, pluginconf.Verbatim.Show(item))
		}
		e, err := conf.ParseVars(item)
		if err != nil {
			return fmt.Errorf("vars: item %d: %w", i+1, err)
		}
		w.Vars = append(w.Vars, e)
	}
	return nil
}

// parseHeaders reads {name: string or number}, at least one, names without ':'.
func parseHeaders(m pluginconf.Member) ([]header, error) {
	members, err := pluginconf.Verbatim.Members(m.Value)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	if len(members) == 0 {
		return nil, errors.New("headers: must not be empty")
	}
	var out []header
	for _, h := range members {
		if h.Name == "" || strings.ContainsAny(h.Name, ":\r\n") {
			return nil, fmt.Errorf("headers: %q: a header name must not be empty or hold ':' or a line break", h.Name)
		}
		var text string
		switch {
		case len(h.Value) > 0 && h.Value[0] == '"':
			text, _ = h.AnyString()
		case len(h.Value) > 0 && (h.Value[0] == '-' || h.Value[0] >= '0' && h.Value[0] <= '9'):
			f, err := strconv.ParseFloat(string(h.Value), 64)
			if err != nil {
				return nil, fmt.Errorf("headers.%s: invalid number %s", h.Name, h.Value)
			}
			text = strconv.FormatFloat(f, 'f', -1, 64)
		default:
			return nil, fmt.Errorf("headers.%s: must be a string or a number, got %s", h.Name, h.Show())
		}
		if strings.ContainsAny(text, "\r\n") {
			return nil, fmt.Errorf("headers.%s: a header value must not hold a line break", h.Name)
		}
		t, err := conf.ParseTemplate(text, textSyntax)
		if err != nil {
			return nil, fmt.Errorf("headers.%s: %w", h.Name, err)
		}
		out = append(out, header{name: []byte(h.Name), value: t})
	}
	return out, nil
}

func hasVars(t *conf.Template) bool {
	for i := range t.Parts {
		if t.Parts[i].Kind != conf.PartText {
			return true
		}
	}
	return false
}
