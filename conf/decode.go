package conf

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DecodeRoute decodes and validates one route as the Admin API received it. The error
// names the offending field, in APISIX's wording where APISIX has one.
func DecodeRoute(data []byte) (*Route, error) {
	var r Route
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DecodeUpstream decodes and validates one upstream.
func DecodeUpstream(data []byte) (*Upstream, error) {
	var u Upstream
	if err := decodeStrict(data, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// DecodeService decodes and validates one service.
func DecodeService(data []byte) (*Service, error) {
	var s Service
	if err := decodeStrict(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}
