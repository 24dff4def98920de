package standalone

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"gw/master/store"
)

// EndMarker is the line that ends a complete YAML file.
const EndMarker = "#END"

// The file formats, as deployment.config_provider names them.
const (
	FormatYAML = "yaml"
	FormatJSON = "json"
)

// ErrNotEnded is a YAML file whose last line is not EndMarker: not read yet.
var ErrNotEnded = errors.New("standalone: the file does not end with a line #END yet, so it is not read (APISIX's rule: a file being written is not half-applied)")

// Object is one object of the file: its kind, id and the JSON value the Admin API
// stores for it.
type Object struct {
	Kind  store.Kind
	ID    string
	Value json.RawMessage
}

// unsupported are the top-level keys APISIX's file takes that gw does not serve yet: a
// file holding one is refused rather than half-served.
var unsupported = map[string]string{
	"stream_routes":   "stream routes (gw proxies HTTP only)",
	"protos":          "protos (grpc-transcode)",
	"secrets":         "secret managers",
	"consumer_groups": "consumer groups",
	"plugins":         "the list of enabled plugins (every built-in plugin is enabled)",
	"stream_plugins":  "stream plugins",
}

// Parse reads a whole file in format (FormatYAML or FormatJSON) into its objects, kinds
// in store.Kinds' order and each kind's in the file's. An error names where the file is
// wrong; a file with one is not served at all.
func Parse(data []byte, format string) ([]Object, error) {
	var root yaml.Node
	switch format {
	case FormatYAML:
		if !endsWithMarker(data) {
			return nil, ErrNotEnded
		}
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("not valid YAML: %w", err)
		}
	case FormatJSON:
		if !json.Valid(data) {
			var v any
			err := json.Unmarshal(data, &v)
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		// JSON is YAML: one parser keeps the two formats' rules the same.
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
	default:
		return nil, fmt.Errorf("standalone: unknown format %q", format)
	}
	if root.Kind == 0 || len(root.Content) == 0 || root.Content[0].Kind == yaml.ScalarNode && root.Content[0].Tag == "!!null" {
		return nil, nil // an empty file (only #END): no objects
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file must be a mapping of kinds (routes, upstreams, ...) to lists, got %s", top.Line, describe(top))
	}
	byKind := map[store.Kind]*yaml.Node{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, list := top.Content[i], top.Content[i+1]
		kind := store.Kind(key.Value)
		if what, ok := unsupported[key.Value]; ok {
			return nil, fmt.Errorf("line %d: %s: %s in the standalone file is not supported yet", key.Line, key.Value, what)
		}
		if !slices.Contains(store.Kinds(), kind) {
			return nil, fmt.Errorf("line %d: unknown key %q; the file holds %s", key.Line, key.Value, kindNames())
		}
		if byKind[kind] != nil {
			return nil, fmt.Errorf("line %d: %s appears twice", key.Line, key.Value)
		}
		if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
			continue // "routes:" with nothing under it
		}
		if list.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("line %d: %s must be a list of objects, got %s", list.Line, key.Value, describe(list))
		}
		byKind[kind] = list
	}
	var out []Object
	for _, kind := range store.Kinds() {
		list := byKind[kind]
		if list == nil {
			continue
		}
		seen := map[string]int{}
		for i, item := range list.Content {
			where := fmt.Sprintf("line %d: %s[%d]", item.Line, kind, i)
			obj, err := object(kind, i, item)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if first, dup := seen[obj.ID]; dup {
				return nil, fmt.Errorf("%s: id %q is %s[%d]'s too; ids are unique in a kind", where, obj.ID, kind, first)
			}
			seen[obj.ID] = i
			out = append(out, obj)
		}
	}
	return out, nil
}

// object turns the list's i-th item into the JSON the Admin API stores.
func object(kind store.Kind, i int, item *yaml.Node) (Object, error) {
	if item.Kind != yaml.MappingNode {
		return Object{}, fmt.Errorf("must be an object (a mapping), got %s", describe(item))
	}
	var value map[string]any
	if err := item.Decode(&value); err != nil {
		return Object{}, err
	}
	idField := "id"
	if kind == store.Consumers {
		idField = "username"
	}
	id := ""
	switch v := value[idField].(type) {
	case nil:
		switch kind {
		case store.Consumers:
			return Object{}, errors.New("username is required: it is a consumer's id")
		case store.PluginMetadata:
			return Object{}, errors.New("id is required: it is the name of the plugin the metadata is for (id: http-logger)")
		}
		id = "arr_" + strconv.Itoa(i+1)
		value["id"] = id
	case string:
		id = v
	case int:
		id = strconv.Itoa(v)
		value[idField] = id
	default:
		return Object{}, fmt.Errorf("%s must be a string or an integer, got %v", idField, v)
	}
	if !store.ValidID(id) {
		return Object{}, fmt.Errorf("%s %q is not a valid id (1 to 64 characters of a-z A-Z 0-9 - _ .)", idField, id)
	}
	if kind == store.PluginMetadata {
		// The file names the plugin in id; the Admin API names it in the path and
		// stores only the metadata, which is what the plugin's schema checks.
		delete(value, "id")
	}
	data, err := json.Marshal(jsonable(value))
	if err != nil {
		return Object{}, fmt.Errorf("cannot be written as JSON: %w", err)
	}
	return Object{Kind: kind, ID: id, Value: data}, nil
}

// jsonable turns what the YAML decoder made into what encoding/json takes: mappings with
// keys that are not strings (a port written as a number: 80: 1) get their keys as text.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	default:
		return v
	}
}

// endsWithMarker reports whether the last line that is not blank is EndMarker.
func endsWithMarker(data []byte) bool {
	data = bytes.TrimRight(data, " \t\r\n")
	last := data
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		last = data[i+1:]
	}
	return string(bytes.TrimSpace(last)) == EndMarker
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func kindNames() string {
	names := make([]string, 0, len(store.Kinds()))
	for _, k := range store.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// ownFields are the store's bookkeeping in a value, meaningless in a file another node
// reads: they are left out of what Encode writes.
var ownFields = []string{"create_time", "update_time"}

// Encode writes objects (as a store holds them) as an APISIX standalone YAML file ending
// with #END: kinds in order, each kind's objects in the order given.
func Encode(objects []store.Object, kinds []store.Kind) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# APISIX standalone config (deployment.config_provider: yaml), written by gwctl export\n")
	for _, kind := range kinds {
		var items []*yaml.Node
		for _, obj := range objects {
			if obj.Kind != kind {
				continue
			}
			n, err := blockNode(obj.Value)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", obj.Kind, obj.ID, err)
			}
			if kind == store.PluginMetadata {
				// Parse's rule the other way round: the plugin's name goes in id.
				n.Content = append([]*yaml.Node{
					{Kind: yaml.ScalarNode, Value: "id"}, {Kind: yaml.ScalarNode, Value: obj.ID},
				}, n.Content...)
			}
			items = append(items, n)
		}
		if len(items) == 0 {
			continue
		}
		doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: string(kind)},
			{Kind: yaml.SequenceNode, Content: items},
		}}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
	}
	buf.WriteString(EndMarker + "\n")
	return buf.Bytes(), nil
}

// blockNode parses a stored JSON value into a YAML node in block style, its keys in the
// stored order. Strings lose JSON's quotes: the encoder quotes again any that would read
// as another type ("1", "true"), and writes a PEM as a literal block.
func blockNode(value json.RawMessage) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(value, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the stored value is not a JSON object")
	}
	n := doc.Content[0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if slices.Contains(ownFields, n.Content[i].Value) {
			n.Content = slices.Delete(n.Content, i, i+2)
			i -= 2
		}
	}
	unflow(n)
	return n, nil
}

func unflow(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		n.Style &^= yaml.FlowStyle
	case yaml.ScalarNode:
		n.Style = 0
	}
	for _, c := range n.Content {
		unflow(c)
	}
}
