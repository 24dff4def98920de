// Package schemacheck judges a JSON value against the part of JSON Schema that gw's
// plugins use to describe their configurations (GET /apisix/admin/plugins/{name}), so
// that tests can hold each schema to what the plugin's decoder accepts. A keyword it does
// not know is an error, never ignored: a schema cannot promise what no test checks.
//
// It reads type (one or a list), enum, properties, patternProperties,
// additionalProperties, required, minProperties, items, minItems, maxItems, minLength,
// maxLength, pattern (Go's RE2 syntax, which the schemas keep to), minimum, maximum,
// exclusiveMinimum, anyOf, oneOf and not; title, description and default are notes.
// Numbers are compared exactly, as decimals; an integer is a number with no fraction
// (60.0 is one), as JSON Schema has it.
package schemacheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Check reports why value does not match schema, nil when it does. A schema that is not
// JSON, or uses a keyword this package does not read, is an error too.
func Check(schema, value []byte) error {
	s, err := decode(schema)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	v, err := decode(value)
	if err != nil {
		return fmt.Errorf("value: %w", err)
	}
	return check(s, v, "")
}

func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

var notes = []string{"title", "description", "default"}

func check(schema, v any, path string) error {
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool {
			if !b {
				return fmt.Errorf("%s: no value is allowed here", where(path))
			}
			return nil
		}
		return fmt.Errorf("%s: a schema must be an object, got %T", where(path), schema)
	}
	for _, keyword := range sortedKeys(s) {
		if slices.Contains(notes, keyword) {
			continue
		}
		if err := checkKeyword(s, keyword, v, path); err != nil {
			return err
		}
	}
	return nil
}

func checkKeyword(s map[string]any, keyword string, v any, path string) error {
	arg := s[keyword]
	obj, isObj := v.(map[string]any)
	arr, isArr := v.([]any)
	str, isStr := v.(string)
	num, isNum := v.(json.Number)
	switch keyword {
	case "type":
		names := []any{arg}
		if list, ok := arg.([]any); ok {
			names = list
		}
		for _, n := range names {
			if name, _ := n.(string); typeMatches(name, v) {
				return nil
			}
		}
		return fmt.Errorf("%s: must be of type %v, got %s", where(path), arg, show(v))
	case "enum":
		for _, allowed := range arg.([]any) {
			if equal(allowed, v) {
				return nil
			}
		}
		return fmt.Errorf("%s: must be one of %s, got %s", where(path), show(arg), show(v))
	case "properties", "patternProperties", "additionalProperties":
		if !isObj {
			return nil
		}
		return checkMembers(s, keyword, obj, path)
	case "required":
		if !isObj {
			return nil
		}
		for _, n := range arg.([]any) {
			if _, has := obj[n.(string)]; !has {
				return fmt.Errorf("%s: %s is required", where(path), n)
			}
		}
	case "minProperties":
		if isObj && len(obj) < toInt(arg) {
			return fmt.Errorf("%s: must have at least %v members", where(path), arg)
		}
	case "items":
		for i, item := range arr {
			if err := check(arg, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case "minItems":
		if isArr && len(arr) < toInt(arg) {
			return fmt.Errorf("%s: must have at least %v items", where(path), arg)
		}
	case "maxItems":
		if isArr && len(arr) > toInt(arg) {
			return fmt.Errorf("%s: must have at most %v items", where(path), arg)
		}
	case "minLength":
		if isStr && utf8.RuneCountInString(str) < toInt(arg) {
			return fmt.Errorf("%s: must be at least %v characters, got %q", where(path), arg, str)
		}
	case "maxLength":
		if isStr && utf8.RuneCountInString(str) > toInt(arg) {
			return fmt.Errorf("%s: must be at most %v characters", where(path), arg)
		}
	case "pattern":
		if !isStr {
			return nil
		}
		re, err := regexp.Compile(arg.(string))
		if err != nil {
			return fmt.Errorf("%s: pattern %q: %w", where(path), arg, err)
		}
		if !re.MatchString(str) {
			return fmt.Errorf("%s: must match %s, got %q", where(path), arg, str)
		}
	case "minimum", "maximum", "exclusiveMinimum":
		if !isNum {
			return nil
		}
		c := rat(num).Cmp(rat(arg.(json.Number)))
		if keyword == "minimum" && c < 0 || keyword == "maximum" && c > 0 || keyword == "exclusiveMinimum" && c <= 0 {
			return fmt.Errorf("%s: %s is %v, got %s", where(path), keyword, arg, num)
		}
	case "anyOf", "oneOf":
		matched := 0
		var first error
		for _, sub := range arg.([]any) {
			if err := check(sub, v, path); err == nil {
				matched++
			} else if first == nil {
				first = err
			}
		}
		switch {
		case matched == 0:
			return fmt.Errorf("%s: matches none of %s (the first: %v)", where(path), keyword, first)
		case keyword == "oneOf" && matched > 1:
			return fmt.Errorf("%s: matches %d schemas of oneOf, not one", where(path), matched)
		}
	case "not":
		if check(arg, v, path) == nil {
			return fmt.Errorf("%s: must not match %s", where(path), show(arg))
		}
	default:
		return fmt.Errorf("%s: schemacheck does not read the keyword %q", where(path), keyword)
	}
	return nil
}

// checkMembers applies properties, patternProperties or additionalProperties (keyword)
// to obj's members. additionalProperties applies to the members neither of the others
// names, as JSON Schema says.
func checkMembers(s map[string]any, keyword string, obj map[string]any, path string) error {
	props, _ := s["properties"].(map[string]any)
	patterns, _ := s["patternProperties"].(map[string]any)
	for _, name := range sortedKeys(obj) {
		member := path + "." + name
		if path == "" {
			member = name
		}
		switch keyword {
		case "properties":
			if sub, ok := props[name]; ok {
				if err := check(sub, obj[name], member); err != nil {
					return err
				}
			}
		case "patternProperties":
			for _, p := range sortedKeys(patterns) {
				re, err := regexp.Compile(p)
				if err != nil {
					return fmt.Errorf("%s: patternProperties %q: %w", where(path), p, err)
				}
				if re.MatchString(name) {
					if err := check(patterns[p], obj[name], member); err != nil {
						return err
					}
				}
			}
		case "additionalProperties":
			if _, named := props[name]; named || matchesAny(patterns, name) {
				continue
			}
			if err := check(s["additionalProperties"], obj[name], member); err != nil {
				return fmt.Errorf("%s: unknown member (%v)", member, err)
			}
		}
	}
	return nil
}

func matchesAny(patterns map[string]any, name string) bool {
	for p := range patterns {
		if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
			return true
		}
	}
	return false
}

func typeMatches(name string, v any) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		return ok && rat(n).IsInt()
	}
	return false
}

func rat(n json.Number) *big.Rat {
	r, ok := new(big.Rat).SetString(n.String())
	if !ok {
		panic("BUG: schemacheck: a decoded number is not a decimal: " + n.String())
	}
	return r
}

func equal(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		return ok && rat(x).Cmp(rat(y)) == 0
	}
	return show(a) == show(b)
}

func toInt(v any) int {
	n, _ := v.(json.Number).Int64()
	return int(n)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func where(path string) string {
	if path == "" {
		return "the value"
	}
	return path
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Lint walks every sub-schema of schema, including those no value reaches, and reports
// the first keyword Check does not read, pattern that does not compile, or default that
// its own schema refuses.
func Lint(schema []byte) error {
	s, err := decode(schema)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return lint(s, "")
}

var keywords = strings.Fields("type enum properties patternProperties additionalProperties required minProperties " +
	"items minItems maxItems minLength maxLength pattern minimum maximum exclusiveMinimum anyOf oneOf not")

func lint(schema any, path string) error {
	if _, isBool := schema.(bool); isBool {
		return nil
	}
	s, ok := schema.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: a schema must be an object, got %s", where(path), show(schema))
	}
	for _, keyword := range sortedKeys(s) {
		arg := s[keyword]
		switch {
		case slices.Contains(notes, keyword):
		case !slices.Contains(keywords, keyword):
			return fmt.Errorf("%s: schemacheck does not read the keyword %q", where(path), keyword)
		case keyword == "properties" || keyword == "patternProperties":
			members, ok := arg.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s must be an object", where(path), keyword)
			}
			for _, name := range sortedKeys(members) {
				if keyword == "patternProperties" {
					if _, err := regexp.Compile(name); err != nil {
						return fmt.Errorf("%s: patternProperties %q: %w", where(path), name, err)
					}
				}
				if err := lint(members[name], path+"/"+keyword+"/"+name); err != nil {
					return err
				}
			}
		case keyword == "additionalProperties" || keyword == "items" || keyword == "not":
			if err := lint(arg, path+"/"+keyword); err != nil {
				return err
			}
		case keyword == "anyOf" || keyword == "oneOf":
			list, ok := arg.([]any)
			if !ok || len(list) == 0 {
				return fmt.Errorf("%s: %s must be a non-empty array", where(path), keyword)
			}
			for i, sub := range list {
				if err := lint(sub, fmt.Sprintf("%s/%s/%d", path, keyword, i)); err != nil {
					return err
				}
			}
		case keyword == "pattern":
			p, _ := arg.(string)
			if _, err := regexp.Compile(p); err != nil {
				return fmt.Errorf("%s: pattern %s: %v", where(path), show(arg), err)
			}
		}
	}
	if d, has := s["default"]; has {
		if err := check(s, d, path); err != nil {
			return fmt.Errorf("%s: the default %s does not match its schema: %w", where(path), show(d), err)
		}
	}
	return nil
}
