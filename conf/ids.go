package conf

import (
	"encoding/json"
	"fmt"
)

// maxIDLength is APISIX's id_schema maxLength.
const maxIDLength = 64

// ParseID checks an id given as text, such as the {id} of /apisix/admin/routes/{id}: 1–64
// characters from [a-zA-Z0-9-_.].
func ParseID(s string) (ID, error) {
	if !isIDText(s) {
		return "", fmt.Errorf("id must be 1-%d characters from [a-zA-Z0-9-_.], got %q", maxIDLength, s)
	}
	return ID(s), nil
}

// UnmarshalJSON accepts APISIX's two id forms: a string of 1–64 characters from
// [a-zA-Z0-9-_.], or a positive integer, kept as its decimal text (so 7 and "7" are the
// same id). A JSON null leaves the id unchanged, as encoding/json expects.
func (id *ID) UnmarshalJSON(data []byte) error {
	if jsonKind(data) == "null" {
		return nil
	}
	parsed, err := parseID(data)
	if err != nil {
		return fmt.Errorf("conf: %w", err)
	}
	*id = parsed
	return nil
}

// ParseJSONID checks an id given as a JSON value, such as the "id" of an Admin API body,
// against APISIX's id schema (see UnmarshalJSON). Only a number written as plain digits
// counts: -1, 0, -0, 1.5 and 1e400 are refused, though their text is made of id
// characters.
func ParseJSONID(raw json.RawMessage) (ID, error) {
	return parseID(raw)
}

func parseID(raw json.RawMessage) (ID, error) {
	switch jsonKind(raw) {
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err == nil && isIDText(s) {
			return ID(s), nil
		}
	case "number":
		// JSON forbids leading zeros, so digits not starting with 0 are a positive integer
		// written plainly (1.0 and 1e3 are not taken as ids).
		if text := string(raw); decimalDigits(text) && text[0] != '0' && len(text) <= maxIDLength {
			return ID(text), nil
		}
	}
	return "", fmt.Errorf("id must be a string of 1-%d characters from [a-zA-Z0-9-_.] or a positive integer, got %s", maxIDLength, describeJSON(raw))
}

func isIDText(s string) bool {
	if s == "" || len(s) > maxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
