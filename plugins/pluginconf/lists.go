package pluginconf

import (
	"encoding/json"
	"fmt"
)

// StringList reads a JSON array of strings with at least minItems items (plugins-a: the
// lists of ip-restriction, uri-blocker, consumer-restriction). An item that is not a
// string is named by its position, counted from 1 as APISIX's messages do.
func (m Member) StringList(minItems int) ([]string, error) {
	var items []json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &items) != nil {
		return nil, fmt.Errorf("%s: must be an array of strings, got %s", m.Name, m.Show())
	}
	if len(items) < minItems {
		return nil, fmt.Errorf("%s: must have at least %d item(s), got %d", m.Name, minItems, len(items))
	}
	out := make([]string, len(items))
	for i, item := range items {
		if len(item) == 0 || item[0] != '"' || json.Unmarshal(item, &out[i]) != nil {
			return nil, fmt.Errorf("%s: item %d must be a string, got %s", m.Name, i+1, m.style.Show(item))
		}
	}
	return out, nil
}
