package pluginconf

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// shownMax is how much of a value a message shows, so that an error stays one line.
const shownMax = 40

// Style is how a plugin's error messages show an offending value. The plugins were
// written apart and their messages differ in small ways; a Style keeps each plugin's
// wording exactly as users (and tests) know it.
type Style struct {
	show func(json.RawMessage) string
	// notBool completes "NAME: must be ..., got VALUE" for a value that is not a boolean.
	notBool string
}

var (
	// Compact shows a value compacted (no white space), cut at 40 bytes on a character
	// boundary, and "nothing" for empty input; a non-boolean "must be true or false".
	// limit-count and prometheus use it.
	Compact = &Style{show: showCompact, notBool: "true or false"}
	// Verbatim shows a value as it was written, cut at 40 bytes; a non-boolean "must be a
	// boolean". key-auth, basic-auth and proxy-rewrite use it.
	Verbatim = &Style{show: showVerbatim, notBool: "a boolean"}
)

// Show renders v for the "got ..." of a message.
func (s *Style) Show(v json.RawMessage) string { return s.show(v) }

func showCompact(v json.RawMessage) string {
	var compact bytes.Buffer
	s := strings.TrimSpace(string(v))
	if json.Compact(&compact, v) == nil {
		s = compact.String()
	}
	if s == "" {
		return "nothing"
	}
	if len(s) > shownMax {
		cut := shownMax
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "..."
	}
	return s
}

func showVerbatim(v json.RawMessage) string {
	if len(v) > shownMax {
		return string(v[:shownMax]) + "..."
	}
	return string(v)
}
