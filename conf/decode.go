package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ObjectError is one problem in an Admin API object, worded as APISIX words it:
// `invalid configuration: property "upstream.nodes" validation failed: <reason>`.
type ObjectError struct {
	// Path is the dotted field path, e.g. "upstream.timeout.connect"; it is empty for a
	// problem with the body as a whole.
	Path   string
	Reason string
}

func (e *ObjectError) Error() string {
	if e.Path == "" {
		return "invalid configuration: " + e.Reason
	}
	return `invalid configuration: property "` + e.Path + `" validation failed: ` + e.Reason
}

// at gives err the field path it was found at. An *ObjectError from a nested object
// already has its full path and passes through.
func at(path string, err error) error {
	if err == nil {
		return nil
	}
	if oe, ok := errors.AsType[*ObjectError](err); ok {
		return oe
	}
	return &ObjectError{Path: path, Reason: err.Error()}
}

// document checks that data is one JSON value and returns it without surrounding space.
func document(data []byte) (json.RawMessage, error) {
	if !json.Valid(data) {
		return nil, malformed(data)
	}
	return bytes.TrimSpace(data), nil
}

// malformed explains why data is not JSON: where (line and column), and the path of the
// field being read when the input went wrong. It costs nothing on valid input, because it
// only runs after json.Valid has failed.
func malformed(data []byte) error {
	err := json.Unmarshal(data, new(json.RawMessage))
	syntax, ok := errors.AsType[*json.SyntaxError](err)
	if !ok {
		return &ObjectError{Reason: fmt.Sprintf("malformed JSON: %v", err)}
	}
	// Offset counts the bytes read up to and including the bad one.
	bad := int(min(max(syntax.Offset-1, 0), int64(len(data))))
	line := bytes.Count(data[:bad], []byte("\n")) + 1
	col := bad - bytes.LastIndexByte(data[:bad], '\n')
	return &ObjectError{
		Path:   pathAt(data, int64(bad)),
		Reason: fmt.Sprintf("malformed JSON at line %d, column %d: %s", line, col, syntax.Error()),
	}
}

// pathAt returns the dotted path of the object member being read at offset: the keys of
// the enclosing objects, up to the member whose value holds offset.
func pathAt(data []byte, offset int64) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var (
		keys      []string // the key of each open object, "" between members
		open      []json.Delim
		expectKey bool
	)
	for {
		tok, err := dec.Token()
		if err != nil || dec.InputOffset() > offset {
			break
		}
		inObject := len(open) > 0 && open[len(open)-1] == '{'
		switch tok {
		case json.Delim('{'), json.Delim('['):
			open = append(open, tok.(json.Delim))
			if tok == json.Delim('{') {
				keys = append(keys, "")
				expectKey = true
			}
			continue
		case json.Delim('}'), json.Delim(']'):
			if inObject {
				keys = keys[:len(keys)-1]
			}
			open = open[:len(open)-1]
		default:
			if key, ok := tok.(string); ok && inObject && expectKey {
				keys[len(keys)-1] = key
				expectKey = false
				continue
			}
		}
		// A value ended: inside an object, the next token is a key again.
		if len(open) > 0 && open[len(open)-1] == '{' {
			keys[len(keys)-1] = ""
			expectKey = true
		}
	}
	return strings.Join(slices.DeleteFunc(keys, func(k string) bool { return k == "" }), ".")
}

// formerFieldNames maps a field of an older APISIX to today's name, for the error that
// refuses it: APISIX 0.x wrote a route's plugins as "plugin_config", which scripts and
// write-ups of that time still send.
var formerFieldNames = map[string]string{"plugin_config": "plugins"}

// fieldDecoders lists every field an object of type T accepts, with what decodes that
// field's value into T. A nil entry is a field APISIX has and gw does not support yet; it
// is rejected with a message that says so instead of "unknown field".
type fieldDecoders[T any] map[string]func(dst *T, path string, raw json.RawMessage) error

// decode decodes the JSON object raw into dst field by field, in key order so that the
// first error reported does not depend on map order. Errors carry the field's path. It
// returns the object's members so the caller can check which fields were given.
func (fields fieldDecoders[T]) decode(dst *T, path string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	members, err := asObject(raw)
	if err != nil {
		return nil, at(path, err)
	}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		fieldPath := memberPath(path, name)
		decodeField, known := fields[name]
		switch {
		case !known:
			hint := ""
			if now, renamed := formerFieldNames[name]; renamed && fields[now] != nil {
				hint = fmt.Sprintf("; %q is an old APISIX name, write %q; ", name, now)
			} else {
				hint = "; "
			}
			return nil, &ObjectError{Path: fieldPath, Reason: "unknown field (additional properties are forbidden)" + hint + "known fields: " + fields.supported()}
		case decodeField == nil:
			return nil, &ObjectError{Path: fieldPath, Reason: name + " is not supported yet"}
		}
		if err := decodeField(dst, fieldPath, members[name]); err != nil {
			return nil, at(fieldPath, err)
		}
	}
	return members, nil
}

// require reports the first of names missing from members.
func require(members map[string]json.RawMessage, path string, names ...string) error {
	for _, name := range names {
		if _, ok := members[name]; !ok {
			return &ObjectError{Path: memberPath(path, name), Reason: "is required"}
		}
	}
	return nil
}

func (fields fieldDecoders[T]) supported() string {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if fields[name] != nil {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// The readers below take one JSON value (already known to be valid JSON) and return its
// Go value or an error that is only the reason; the caller's field path is added by at.

// jsonKind names the JSON type of raw the way APISIX's schema errors do.
func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// describeJSON renders a value for "got ..." in messages: its type, and for scalars the
// value itself, cut short if long.
func describeJSON(raw json.RawMessage) string {
	kind := jsonKind(raw)
	switch kind {
	case "object", "array", "null":
		return kind
	}
	const maxShown = 40
	text := string(raw)
	if len(text) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "..."
		if kind == "string" {
			text += `"`
		}
	}
	return kind + " " + string(text)
}

func wrongType(want string, raw json.RawMessage) error {
	return fmt.Errorf("wrong type: expected %s, got %s", want, describeJSON(raw))
}

func asObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if jsonKind(raw) != "object" {
		return nil, wrongType("object", raw)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, err
	}
	return members, nil
}

func asString(raw json.RawMessage) (string, error) {
	if jsonKind(raw) != "string" {
		return "", wrongType("string", raw)
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func asBool(raw json.RawMessage) (bool, error) {
	if jsonKind(raw) != "boolean" {
		return false, wrongType("boolean", raw)
	}
	return raw[0] == 't', nil
}

// maxExactFloat is the largest integer a float64 holds exactly: a number written as 1e3 or
// 5.0 counts as an integer (as in APISIX's JSON schema) only up to here.
const maxExactFloat = 1 << 53

// asInteger accepts a JSON number with no fractional part.
func asInteger(raw json.RawMessage) (int64, error) {
	if jsonKind(raw) != "number" {
		return 0, wrongType("integer", raw)
	}
	text := string(raw)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	switch {
	case err == nil && f != math.Trunc(f):
		return 0, wrongType("integer", raw)
	case err != nil || math.Abs(f) > maxExactFloat:
		return 0, fmt.Errorf("integer out of range, got %s", text)
	}
	return int64(f), nil
}

func asInt(raw json.RawMessage) (int, error) {
	n, err := asInteger(raw)
	return int(n), err
}

func asNumber(raw json.RawMessage) (float64, error) {
	if jsonKind(raw) != "number" {
		return 0, wrongType("number", raw)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fmt.Errorf("number out of range, got %s", raw)
	}
	return f, nil
}

// intAtLeast makes a reader for an integer with a lower bound only; ranges.go has the
// readers bounded at both ends.
func intAtLeast(least int) func(json.RawMessage) (int, error) {
	return func(raw json.RawMessage) (int, error) {
		n, err := asInt(raw)
		if err == nil && n < least {
			err = fmt.Errorf("must be >= %d, got %d", least, n)
		}
		return n, err
	}
}

// checkedString reads a string and applies check to it.
func checkedString(raw json.RawMessage, check func(string) error) (string, error) {
	s, err := asString(raw)
	if err != nil {
		return "", err
	}
	return s, check(s)
}

// stringList reads an array of unique strings, each passing check. An empty array is an
// error when minItems is 1 and decodes to nil otherwise.
func stringList(raw json.RawMessage, minItems int, check func(string) error) ([]string, error) {
	if jsonKind(raw) != "array" {
		return nil, wrongType("array", raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	if len(items) < minItems {
		return nil, fmt.Errorf("must have at least %d item(s), got %d", minItems, len(items))
	}
	if len(items) == 0 {
		return nil, nil
	}
	list := make([]string, len(items))
	firstAt := make(map[string]int, len(items)) // a body may hold 100k items: no O(n²)
	for i, item := range items {
		s, err := checkedString(item, check)
		if err != nil {
			return nil, fmt.Errorf("failed to validate item %d: %w", i+1, err)
		}
		if j, seen := firstAt[s]; seen {
			return nil, fmt.Errorf("expected unique items but items %d and %d are equal", j+1, i+1)
		}
		firstAt[s] = i
		list[i] = s
	}
	return list, nil
}

// optional turns a reader of V into a reader of *V, for fields where absent and zero
// differ.
func optional[V any](read func(json.RawMessage) (V, error)) func(json.RawMessage) (*V, error) {
	return func(raw json.RawMessage) (*V, error) {
		v, err := read(raw)
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
}

// into makes a field decoder from the field it fills and a reader of the field's value.
func into[T, V any](field func(*T) *V, read func(json.RawMessage) (V, error)) func(*T, string, json.RawMessage) error {
	return func(dst *T, _ string, raw json.RawMessage) error {
		v, err := read(raw)
		if err != nil {
			return err
		}
		*field(dst) = v
		return nil
	}
}

// intoAt is into for readers of nested objects, which report errors under their own path.
func intoAt[T, V any](field func(*T) *V, read func(path string, raw json.RawMessage) (V, error)) func(*T, string, json.RawMessage) error {
	return func(dst *T, path string, raw json.RawMessage) error {
		v, err := read(path, raw)
		if err != nil {
			return err
		}
		*field(dst) = v
		return nil
	}
}

// memberPath is the path of field name inside the object at parent.
func memberPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func decimalDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
