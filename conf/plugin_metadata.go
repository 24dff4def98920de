package conf

import "encoding/json"

// PluginMetadata is APISIX's plugin_metadata object: settings one plugin shares across
// every route that configures it (the loggers' log_format), stored under the plugin's
// name (/apisix/plugin_metadata/<name>). As in APISIX the stored value has no "id": the
// key names it. Value is the object as stored, create_time and update_time included; the
// plugin reads its own members from it (plugins.MetadataOwner), which this package
// cannot check, since it knows no plugin: the Admin API checks them at each write and a
// worker leaves out a stored object whose members its plugin refuses.
type PluginMetadata struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// DecodePluginMetadata decodes plugin name's metadata: a JSON object. What its members
// mean is the plugin's (plugins.MetadataOwner).
func DecodePluginMetadata(name string, data []byte) (*PluginMetadata, error) {
	raw, err := document(data)
	if err != nil {
		return nil, err
	}
	if _, err := asObject(raw); err != nil {
		return nil, &ObjectError{Reason: err.Error()}
	}
	return &PluginMetadata{Name: name, Value: raw}, nil
}

// MetadataOf is the stored metadata of the plugin named name, nil when it has none.
func (s *Snapshot) MetadataOf(name string) json.RawMessage {
	if s == nil {
		return nil
	}
	for i := range s.PluginMetadata {
		if s.PluginMetadata[i].Name == name {
			return s.PluginMetadata[i].Value
		}
	}
	return nil
}
