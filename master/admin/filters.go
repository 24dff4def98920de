package admin

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"

	"gw/master/store"
)

// listFilter is APISIX's list query filters (admin/v3_adapter.lua): name, a regular
// expression searched in the object's name; label, a label key the object has; uri, a
// regular expression searched in a route's uri or any of its uris. Objects missing the
// field never match. All given filters must hold, and total counts what passes them.
type listFilter struct {
	name     *regexp.Regexp
	label    string
	hasLabel bool
	uri      *regexp.Regexp
}

// parseListFilter reads the filters from query. A regular expression that does not
// compile is an error (APISIX's PCRE quietly matches nothing): a typo should say so.
func parseListFilter(query url.Values) (*listFilter, error) {
	var f listFilter
	for _, field := range []struct {
		param string
		dst   **regexp.Regexp
	}{{"name", &f.name}, {"uri", &f.uri}} {
		if !query.Has(field.param) {
			continue
		}
		re, err := regexp.Compile(query.Get(field.param))
		if err != nil {
			return nil, fmt.Errorf("invalid %s filter %q: not a regular expression (RE2 syntax): %v", field.param, query.Get(field.param), err)
		}
		*field.dst = re
	}
	f.label, f.hasLabel = query.Get("label"), query.Has("label")
	if f.name == nil && f.uri == nil && !f.hasLabel {
		return nil, nil
	}
	return &f, nil
}

// filterFields are the stored fields the filters read; the rest of the object is skipped.
type filterFields struct {
	Name   *string           `json:"name"`
	Labels map[string]string `json:"labels"`
	URI    *string           `json:"uri"`
	URIs   []string          `json:"uris"`
}

// keep reports whether obj passes every filter. A stored value that does not decode
// (never the case for what the Admin API stored) passes none.
func (f *listFilter) keep(obj store.Object) bool {
	var fields filterFields
	if err := json.Unmarshal(obj.Value, &fields); err != nil {
		return false
	}
	if f.name != nil && (fields.Name == nil || !f.name.MatchString(*fields.Name)) {
		return false
	}
	if f.hasLabel {
		if _, ok := fields.Labels[f.label]; !ok {
			return false
		}
	}
	if f.uri != nil && !f.anyURI(fields) {
		return false
	}
	return true
}

func (f *listFilter) anyURI(fields filterFields) bool {
	if fields.URI != nil && f.uri.MatchString(*fields.URI) {
		return true
	}
	for _, u := range fields.URIs {
		if f.uri.MatchString(u) {
			return true
		}
	}
	return false
}

// filterObjects returns the objects that pass f, in their order; a nil f keeps all.
func filterObjects(objects []store.Object, f *listFilter) []store.Object {
	if f == nil {
		return objects
	}
	kept := make([]store.Object, 0, len(objects))
	for _, obj := range objects {
		if f.keep(obj) {
			kept = append(kept, obj)
		}
	}
	return kept
}
