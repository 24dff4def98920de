package conf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Readers and checks for the fields routes, upstreams and services share, with APISIX's
// limits (schema_def.lua). Lengths count characters, as APISIX's JSON schema does.

// ID is an object id. APISIX accepts a string (1–64 chars of [a-zA-Z0-9-_.]) or a
// positive integer; both are kept as the string form (ids.go reads them).
type ID string

// Timeout is APISIX's {connect, send, read} in seconds, each MinSeconds to MaxSeconds.
type Timeout struct {
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Read    float64 `json:"read"`
}

// presentMap tells a given but empty map (non-nil pointer) from a missing one (nil).
func presentMap(m map[string]json.RawMessage) *map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	return &m
}

func readName(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error {
		if err := checkLength(s, 1, 256); err != nil {
			return err
		}
		return checkNoControl(s)
	})
}

// checkNoControl refuses the ASCII control characters (U+0000–U+001F and DEL): a name,
// a label or a uri is shown in logs, metrics labels and dashboards, where a newline or an
// escape sequence forges or hides output, and no request path holds one unencoded.
func checkNoControl(s string) error {
	if i := strings.IndexFunc(s, isASCIIControl); i >= 0 {
		return fmt.Errorf("must not contain control characters (byte 0x%02x at offset %d), got %q", s[i], i, s)
	}
	return nil
}

func isASCIIControl(r rune) bool { return r < 0x20 || r == 0x7f }

func readDesc(raw json.RawMessage) (string, error) {
	return checkedString(raw, func(s string) error { return checkLength(s, 0, 256) })
}

func checkLength(s string, least, most int) error {
	n := utf8.RuneCountInString(s)
	switch {
	case n >= least && n <= most:
		return nil
	case least == 0:
		return fmt.Errorf("must be at most %d characters long, got %d", most, n)
	}
	return fmt.Errorf("must be %d-%d characters long, got %d", least, most, n)
}

// decodeLabels reads {key: value}; each value is 1–256 characters with no white space.
// An empty object gives nil.
func decodeLabels(path string, raw json.RawMessage) (map[string]string, error) {
	members, err := asObject(raw)
	if err != nil {
		return nil, at(path, err)
	}
	if len(members) == 0 {
		return nil, nil
	}
	labels := make(map[string]string, len(members))
	for _, key := range slices.Sorted(maps.Keys(members)) {
		if err := checkNoControl(key); err != nil {
			return nil, at(path, fmt.Errorf("label name %w", err))
		}
		value, err := checkedString(members[key], checkLabelValue)
		if err != nil {
			return nil, at(memberPath(path, key), err)
		}
		labels[key] = value
	}
	return labels, nil
}

func checkLabelValue(s string) error {
	if checkLength(s, 1, 256) != nil || strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return fmt.Errorf("must be 1-256 characters with no white space, got %q", s)
	}
	return checkNoControl(s)
}

const maxURILength = 4096

func readURI(raw json.RawMessage) (string, error) {
	return checkedString(raw, checkURI)
}

func readURIs(raw json.RawMessage) ([]string, error) {
	return stringList(raw, 1, checkURI)
}

func checkURI(s string) error {
	if err := checkLength(s, 1, maxURILength); err != nil {
		return err
	}
	if !strings.HasPrefix(s, "/") {
		return fmt.Errorf(`must start with "/", got %q`, s)
	}
	return checkNoControl(s)
}

// httpMethods is APISIX's method enum.
var httpMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"}

// readMethods gives nil for an empty list, which like a missing one means every method.
func readMethods(raw json.RawMessage) ([]string, error) {
	return stringList(raw, 0, func(s string) error {
		if !slices.Contains(httpMethods, s) {
			return fmt.Errorf("matches none of the enum values (%s), got %q", strings.Join(httpMethods, ", "), s)
		}
		return nil
	})
}

func readHost(raw json.RawMessage) (string, error) {
	return checkedString(raw, checkHost)
}

func readHosts(raw json.RawMessage) ([]string, error) {
	return stringList(raw, 1, checkHost)
}

// checkHost is APISIX's host_def: ^\*$|^\*?[0-9a-zA-Z-._\[\]:]+$, a name with an optional
// leading wildcard, or "*" alone.
func checkHost(s string) error {
	name := strings.TrimPrefix(s, "*")
	ok := s == "*" || name != ""
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = isAlnum(c) || strings.IndexByte("-._[]:", c) >= 0
	}
	if !ok {
		return fmt.Errorf(`must be "*" or a host name of letters, digits and "-._[]:", optionally after a leading "*", got %q`, s)
	}
	return nil
}

func readRemoteAddr(raw json.RawMessage) (string, error) {
	return checkedString(raw, checkRemoteAddr)
}

func readRemoteAddrs(raw json.RawMessage) ([]string, error) {
	return stringList(raw, 1, checkRemoteAddr)
}

// checkRemoteAddr accepts an IPv4 or IPv6 address, with or without a CIDR prefix length.
func checkRemoteAddr(s string) error {
	var err error
	if strings.Contains(s, "/") {
		_, err = netip.ParsePrefix(s)
	} else if ip, parseErr := netip.ParseAddr(s); parseErr != nil || ip.Zone() != "" {
		err = fmt.Errorf("bad address")
	}
	if err != nil {
		return fmt.Errorf("must be an IPv4 or IPv6 address, optionally with a CIDR prefix length, got %q", s)
	}
	return nil
}

// readPlugins keeps each plugin's configuration raw, for the plugin registry to check. The
// map is non-nil even when empty: "plugins": {} alone is a valid route action in APISIX.
func readPlugins(raw json.RawMessage) (map[string]json.RawMessage, error) {
	members, err := asObject(raw)
	if err != nil {
		return nil, err
	}
	plugins := make(map[string]json.RawMessage, len(members))
	for name, config := range members {
		plugins[name] = canonicalJSON(config)
	}
	return plugins, nil
}

// canonicalJSON returns valid JSON in the form encoding/json gives a json.RawMessage when
// it encodes one (compact, with <, > and & escaped), so that a decoded object encodes and
// decodes back to itself.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		panic("BUG: conf: canonicalJSON given invalid JSON: " + err.Error())
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.Bytes()
}

var timeoutFields = fieldDecoders[Timeout]{
	"connect": into(func(t *Timeout) *float64 { return &t.Connect }, readSeconds),
	"send":    into(func(t *Timeout) *float64 { return &t.Send }, readSeconds),
	"read":    into(func(t *Timeout) *float64 { return &t.Read }, readSeconds),
}

// decodeTimeout reads {connect, send, read}: all three required, seconds > 0 (from
// MinSeconds to MaxSeconds).
func decodeTimeout(path string, raw json.RawMessage) (*Timeout, error) {
	var t Timeout
	members, err := timeoutFields.decode(&t, path, raw)
	if err == nil {
		err = require(members, path, "connect", "send", "read")
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}
