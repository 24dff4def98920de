package pluginconf

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Show renders the member's value for the "got ..." of a message, in its Style.
func (m Member) Show() string { return m.style.Show(m.Value) }

// Bool reads true or false.
func (m Member) Bool() (bool, error) {
	switch string(m.Value) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: must be %s, got %s", m.Name, m.style.notBool, m.Show())
}

// AnyString reads a JSON string, empty or not.
func (m Member) AnyString() (string, error) {
	var s string
	if len(m.Value) == 0 || m.Value[0] != '"' || json.Unmarshal(m.Value, &s) != nil {
		return "", fmt.Errorf("%s: must be a string, got %s", m.Name, m.Show())
	}
	return s, nil
}

// NonEmptyString reads a JSON string of at least one byte.
func (m Member) NonEmptyString() (string, error) {
	s, err := m.AnyString()
	if err == nil && s == "" {
		err = fmt.Errorf("%s: must not be empty", m.Name)
	}
	return s, err
}

// OneOf reads a JSON string that is one of allowed.
func (m Member) OneOf(allowed ...string) (string, error) {
	var s string
	if len(m.Value) > 0 && m.Value[0] == '"' && json.Unmarshal(m.Value, &s) == nil {
		for _, a := range allowed {
			if s == a {
				return a, nil
			}
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	return "", fmt.Errorf("%s: must be one of %s, got %s", m.Name, strings.Join(quoted, ", "), m.Show())
}

// Object checks that the value is a JSON object (whose members are not looked at), as
// for "_meta".
func (m Member) Object() error {
	if len(m.Value) == 0 || m.Value[0] != '{' {
		return fmt.Errorf("%s: must be an object, got %s", m.Name, m.Show())
	}
	return nil
}

// PositiveInt reads an integer from 1 to max. One above max, an int64's maximum
// included, is told the whole range.
func (m Member) PositiveInt(max int64) (int64, error) {
	n, ok := Integer(m.Value)
	switch {
	case ok && n >= 1 && n <= max:
		return n, nil
	case ok && n > max, !ok && isIntegerAboveInt64(m.Value):
		return 0, fmt.Errorf("%s: must be an integer from 1 to %d, got %s", m.Name, max, m.Show())
	}
	return 0, fmt.Errorf("%s: must be an integer > 0, got %s", m.Name, m.Show())
}

// isIntegerAboveInt64 reports whether v is a JSON number without a fractional part that
// is too large for an int64 (1e400 included).
func isIntegerAboveInt64(v json.RawMessage) bool {
	s := string(v)
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	return err != nil && math.IsInf(f, 1) || err == nil && f == math.Trunc(f) && f >= math.MaxInt64
}

// IntIn reads an integer from min to max.
func (m Member) IntIn(min, max int64) (int64, error) {
	n, ok := Integer(m.Value)
	if !ok || n < min || n > max {
		return 0, fmt.Errorf("%s: must be an integer from %d to %d, got %s", m.Name, min, max, m.Show())
	}
	return n, nil
}

// Integer reads a JSON number with an integral value that fits an int64; like JSON
// Schema, 60.0 and 6e1 count as the integer 60.
func Integer(v json.RawMessage) (int64, bool) {
	s := string(v)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}
