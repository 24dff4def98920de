package consumerrestriction

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "consumer-restriction"

// Priority places consumer-restriction in the chain as APISIX does (higher runs first):
// after the authentication plugins (basic-auth 2520, key-auth 2500), which name the
// consumer it judges.
const Priority = 2400

func init() { plugins.Register(plugin{}) }

// plugin is consumer-restriction as the host sees it; its instance is the route's Config
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Subject is what a configuration restricts: its "type".
type Subject uint8

// The subjects gw knows; consumer_group_id waits for consumer groups.
const (
	ConsumerName Subject = iota
	ServiceID
	RouteID
)

var subjectNames = []string{"consumer_name", "service_id", "route_id"}

// Config is one consumer-restriction configuration, compiled. It is immutable once Parse
// returns it and safe to share between goroutines.
type Config struct {
	Subject Subject
	// Whitelist and Blacklist are nil when not set.
	Whitelist, Blacklist []string
	// AllowedByMethods are the methods each named subject may use; a subject not named
	// may use any.
	AllowedByMethods []allowedMethods
	RejectedCode     int
	// rejectedBody is {"message": rejected_msg or "The <type> is forbidden."};
	// unknownBody is the 401's, for a request without the subject.
	rejectedBody, unknownBody []byte
}

type allowedMethods struct {
	user    string
	methods []string
}

// methods is APISIX's method_schema enum.
var methods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"}

// Parse decodes one consumer-restriction configuration strictly and applies APISIX's
// defaults. The error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{RejectedCode: 403}
	var rejectedMsg *string
	for _, m := range members {
		switch m.Name {
		case "type":
			var s string
			if s, err = m.OneOf("consumer_name", "service_id", "route_id", "consumer_group_id"); err == nil {
				if s == "consumer_group_id" {
					err = errors.New(`type: "consumer_group_id" is not supported yet: gw has no consumer groups`)
				}
				c.Subject = Subject(slices.Index(subjectNames, s))
			}
		case "whitelist":
			c.Whitelist, err = m.StringList(1)
		case "blacklist":
			c.Blacklist, err = m.StringList(1)
		case "allowed_by_methods":
			c.AllowedByMethods, err = parseAllowedByMethods(m)
		case "rejected_code":
			var code int64
			code, err = m.IntIn(200, 599)
			c.RejectedCode = int(code)
		case "rejected_msg":
			var s string
			s, err = m.AnyString()
			rejectedMsg = &s
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: type, whitelist, blacklist, allowed_by_methods, rejected_code, rejected_msg", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.Whitelist == nil && c.Blacklist == nil && c.AllowedByMethods == nil {
		return nil, errors.New("configuration must set at least one of whitelist, blacklist or allowed_by_methods")
	}
	name := subjectNames[c.Subject]
	msg := "The " + name + " is forbidden."
	if rejectedMsg != nil {
		msg = *rejectedMsg
	}
	c.rejectedBody = messageBody(msg)
	c.unknownBody = messageBody("The request is rejected, please check the " + name + " for this request")
	return c, nil
}

// messageBody is {"message": msg} as APISIX's core.response.exit encodes it.
func messageBody(msg string) []byte {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	return append(b, '\n')
}

// parseAllowedByMethods reads [{"user": ..., "methods": [...]}, ...]. APISIX's schema
// requires neither member, but an item without user never applies and one without
// methods fails every request of its user with a Lua error: both are refused.
func parseAllowedByMethods(m pluginconf.Member) ([]allowedMethods, error) {
	var items []json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &items) != nil {
		return nil, fmt.Errorf("allowed_by_methods: must be an array of {\"user\", \"methods\"} objects, got %s", m.Show())
	}
	out := make([]allowedMethods, 0, len(items))
	for i, item := range items {
		path := fmt.Sprintf("allowed_by_methods[%d]", i+1)
		fields, err := pluginconf.Verbatim.Members(item)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var a allowedMethods
		hasUser := false
		for _, f := range fields {
			switch f.Name {
			case "user":
				a.user, err = f.AnyString()
				hasUser = true
			case "methods":
				if a.methods, err = f.StringList(1); err == nil {
					for j, method := range a.methods {
						if !slices.Contains(methods, method) {
							err = fmt.Errorf("methods: item %d: must be one of %s, got %q", j+1, strings.Join(methods, ", "), method)
							break
						}
					}
				}
			default:
				err = fmt.Errorf("%s: unknown field; an item has user and methods", f.Name)
			}
			if err != nil {
				return nil, fmt.Errorf("%s.%w", path, err)
			}
		}
		if !hasUser || a.methods == nil {
			return nil, fmt.Errorf("%s: must set both user and methods", path)
		}
		out = append(out, a)
	}
	return out, nil
}
