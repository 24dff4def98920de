package pluginconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Member is one name/value pair of a configuration object. Its methods read Value as one
// JSON type and name the member in their errors.
type Member struct {
	Name  string
	Value json.RawMessage
	style *Style
}

// Members splits a JSON object into its members, in document order. It refuses anything
// but one object, a repeated name and trailing data, before any member is looked at.
func (s *Style) Members(raw json.RawMessage) ([]Member, error) {
	var members []Member
	err := s.Each(raw, func(m Member) error {
		members = append(members, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return members, nil
}

// Each calls fn with each member of a JSON object as it is read, stopping at the first
// error, fn's returned as is. Unlike Members, a member's error is reported before a
// syntax error or repeated name later in the document.
func (s *Style) Each(raw json.RawMessage, fn func(Member) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("configuration must be a JSON object, got %s", s.Show(raw))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("%s: appears twice; keep one", name)
		}
		seen[name] = true
		if err := fn(Member{Name: name, Value: value, style: s}); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON: data after the object")
	}
	return nil
}

// ValidateWith turns a plugin's Parse into the Validate func of its registration.
func ValidateWith[T any](parse func(json.RawMessage) (T, error)) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		_, err := parse(raw)
		return err
	}
}
