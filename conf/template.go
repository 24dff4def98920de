package conf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Template is text with variables in it, in APISIX's resolve_var syntax, which chash's
// vars_combinations key, limit-count's var_combination key and proxy-rewrite's uri and
// header values share:
//
//	$name              a variable; the name runs over letters, digits, '_' and '.'
//	${name}            the same, with the name in braces (spaces around it ignored)
//	${name ?? text}    text when the variable has no value
//	\$name             literal, backslash kept (APISIX keeps it too)
//	$ or ${            a '$' that starts none of the above is literal
//
// With TemplateSyntax.Captures, $1 and ${1} are a regular expression's captures. A
// Template is immutable once ParseTemplate returns it and safe for concurrent use;
// gw/plugins/vars expands it per request.
type Template struct {
	Parts []TemplatePart
}

// TemplatePart is one run of a Template: literal text, a variable or a capture.
type TemplatePart struct {
	Kind PartKind
	// Text is a PartText's text.
	Text string
	// Var is a PartVar's variable. It is the zero Var, which never has a value, for an
	// unknown name that TemplateSyntax.UnknownIsEmpty let through.
	Var Var
	// Fallback is the text after "??", which a PartVar reads as when its variable has no
	// value; HasFallback tells an empty fallback ("${a ??}") from none.
	Fallback    string
	HasFallback bool
	// Capture is a PartCapture's number, 0 to 99 ($0 is the whole match).
	Capture int
}

// PartKind says what a TemplatePart is.
type PartKind uint8

// The kinds of TemplatePart.
const (
	PartText PartKind = iota
	PartVar
	PartCapture
)

// TemplateSyntax is what a Template may hold besides text and known variables.
type TemplateSyntax struct {
	// Captures reads $N and ${N} as capture N of a regular expression (proxy-rewrite's
	// header values, after regex_uri); without it they are refused.
	Captures bool
	// UnknownIsEmpty keeps a variable gw does not know as one that never has a value,
	// instead of refusing the template. Only proxy-rewrite's header values take it: APISIX
	// resolves an unknown variable to nothing there, and an empty value removes the header.
	UnknownIsEmpty bool
}

// maxCapture is the highest capture number a template may name (ngx.re's limit).
const maxCapture = 99

// ParseTemplate parses s. The error names the reference that is wrong.
func ParseTemplate(s string, syntax TemplateSyntax) (Template, error) {
	var t Template
	text := 0 // where the literal run not yet in t.Parts starts
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || (i > 0 && s[i-1] == '\\') {
			continue
		}
		ref, end, ok := referenceAt(s, i)
		if !ok {
			continue
		}
		part, err := parseReference(ref, syntax)
		if err != nil {
			return Template{}, err
		}
		if text < i {
			t.Parts = append(t.Parts, TemplatePart{Kind: PartText, Text: s[text:i]})
		}
		t.Parts = append(t.Parts, part)
		text, i = end, end-1
	}
	if text < len(s) {
		t.Parts = append(t.Parts, TemplatePart{Kind: PartText, Text: s[text:]})
	}
	return t, nil
}

// reference is a $-reference as written: its name, and what follows "??" in braces.
type reference struct {
	name, fallback string
	hasFallback    bool
	braced         bool
}

// referenceAt reads the reference starting with the '$' at s[i] and returns where it
// ends; ok is false when the '$' starts none, and is literal.
func referenceAt(s string, i int) (ref reference, end int, ok bool) {
	j := i + 1
	if j < len(s) && s[j] == '{' {
		closing := strings.IndexByte(s[j:], '}')
		if closing < 0 {
			return reference{}, 0, false
		}
		inner := strings.TrimSpace(s[j+1 : j+closing])
		if inner == "" {
			return reference{}, 0, false
		}
		ref = reference{name: inner, braced: true}
		if name, fallback, found := strings.Cut(inner, "??"); found {
			// APISIX splits at every "??" and takes the second piece.
			fallback, _, _ = strings.Cut(fallback, "??")
			ref.name, ref.fallback, ref.hasFallback = strings.TrimSpace(name), strings.TrimSpace(fallback), true
		}
		return ref, j + closing + 1, true
	}
	k := j
	if k < len(s) && isDigit(s[k]) {
		// A capture number ends at its last digit, as APISIX reads captures before
		// variables: "$1.html" is capture 1, then text.
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		return reference{name: s[j:k]}, k, true
	}
	for k < len(s) && isVarNameByte(s[k]) {
		k++
	}
	if k == j {
		return reference{}, 0, false
	}
	return reference{name: s[j:k]}, k, true
}

func parseReference(ref reference, syntax TemplateSyntax) (TemplatePart, error) {
	if n, isCapture := captureNumber(ref.name); isCapture {
		switch {
		case !syntax.Captures:
			return TemplatePart{}, fmt.Errorf("$%s: captures are filled by regex_uri and usable in proxy-rewrite's header values only", ref.name)
		case ref.hasFallback:
			return TemplatePart{}, fmt.Errorf("${%s ?? ...}: a capture takes no fallback", ref.name)
		case n > maxCapture:
			return TemplatePart{}, fmt.Errorf("$%s: capture number out of range (at most %d)", ref.name, maxCapture)
		}
		return TemplatePart{Kind: PartCapture, Capture: n}, nil
	}
	part := TemplatePart{Kind: PartVar, Fallback: ref.fallback, HasFallback: ref.hasFallback}
	v, err := ParseVar(ref.name)
	switch {
	case err == nil:
		part.Var = v
	case errors.Is(err, ErrUnknownVar) && syntax.UnknownIsEmpty:
		// part.Var stays the zero Var: no value, ever.
	default:
		if head, _, dotted := strings.Cut(ref.name, "."); dotted && !ref.braced {
			if _, headErr := ParseVar(head); headErr == nil {
				return TemplatePart{}, fmt.Errorf("%w (a '.' continues a $name: write ${%s} when text follows)", err, head)
			}
		}
		return TemplatePart{}, err
	}
	return part, nil
}

// captureNumber reads a reference made of digits alone as a capture number; a number
// too large for an int reads as past maxCapture.
func captureNumber(name string) (int, bool) {
	if !isDigits(name) {
		return 0, false
	}
	n, err := strconv.Atoi(name)
	if err != nil {
		return maxCapture + 1, true
	}
	return n, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// isVarNameByte is PCRE's \w and '.', the bytes of APISIX's unbraced $name.
func isVarNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.'
}
