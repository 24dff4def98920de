package router

import (
	"bytes"
	"strings"
)

// A path with wildcards or parameters is stored under the literal prefix before its first
// one, as a prefix key, and its candidates carry the rest of the path as a pattern that a
// request's remaining path must match whole (lua-resty-radixtree's compare_param):
//
//	"/files/*name", "/a/*/b"   a segment starting with '*' matches any text, '/' included
//	"/user/:id"                 with Options.Parameters, a segment starting with ':'
//	                            matches one or more bytes other than '/'
//
// A '*' that ends the path is the plain prefix match, which needs no pattern.

type tokenKind uint8

const (
	literal  tokenKind = iota // text, compared exactly
	param                     // one whole segment: one or more bytes up to the next '/'
	catchAll                  // any text, possibly empty, slashes included
)

type token struct {
	kind tokenKind
	text string // literal only
}

// splitPattern returns the literal prefix of p before its first wildcard or parameter
// segment and the tokens of the rest; tokens is nil when p has none (an exact path, or a
// prefix match with its '*' at the end).
func splitPattern(p string, parameters bool) (prefix string, tokens []token) {
	start := patternStart(p, parameters)
	if start < 0 {
		return p, nil
	}
	rest := p[start:]
	for rest != "" {
		seg, after, _ := strings.Cut(rest, "/")
		switch {
		case seg != "" && seg[0] == '*':
			tokens = append(tokens, token{kind: catchAll})
		case parameters && seg != "" && seg[0] == ':':
			tokens = append(tokens, token{kind: param})
		case len(seg) == len(rest) && strings.HasSuffix(seg, "*"):
			// The path's final '*' keeps its meaning: a prefix match ("/a/*/b*").
			tokens = appendLiteral(tokens, seg[:len(seg)-1])
			tokens = append(tokens, token{kind: catchAll})
		default:
			tokens = appendLiteral(tokens, seg)
		}
		if len(seg) < len(rest) { // a '/' follows
			tokens = appendLiteral(tokens, "/")
		}
		rest = after
	}
	return p[:start], tokens
}

func appendLiteral(tokens []token, text string) []token {
	if text == "" {
		return tokens
	}
	if n := len(tokens); n > 0 && tokens[n-1].kind == literal {
		tokens[n-1].text += text
		return tokens
	}
	return append(tokens, token{kind: literal, text: text})
}

// patternStart returns the index of the first segment of p that is a wildcard (not the
// final '*') or, with parameters, a parameter; -1 when there is none.
func patternStart(p string, parameters bool) int {
	for i := 1; i < len(p); i++ {
		if p[i-1] != '/' {
			continue
		}
		switch {
		case p[i] == '*' && i != len(p)-1:
			return i
		case p[i] == ':' && parameters:
			return i
		}
	}
	return -1
}

// matchTokens reports whether path matches tokens whole. It allocates nothing, and its
// time is at most quadratic in the path's length, never exponential: the tokens
// between two catch-alls (a run) match at a given start in one way only, and where that
// match ends never moves left as the start moves right, so placing each run at its
// leftmost match leaves the most room for the rest and no choice is ever revisited.
func matchTokens(tokens []token, path []byte) bool {
	run, rest, more := cutAtCatchAll(tokens)
	pos, ok := matchRun(run, path, 0)
	if !ok {
		return false
	}
	if !more {
		return pos == len(path)
	}
	for {
		run, rest, more = cutAtCatchAll(rest)
		if !more {
			break
		}
		start := pos
		for ; start <= len(path); start++ {
			if end, ok := matchRun(run, path, start); ok {
				pos = end
				break
			}
		}
		if start > len(path) {
			return false
		}
	}
	// The last run must end the path: the rightmost start that matches ends furthest.
	if len(run) == 0 {
		return true
	}
	for start := len(path); start >= pos; start-- {
		if end, ok := matchRun(run, path, start); ok {
			return end == len(path)
		}
	}
	return false
}

// cutAtCatchAll splits tokens at the first catch-all; more is false when there is none.
func cutAtCatchAll(tokens []token) (run, rest []token, more bool) {
	for i, t := range tokens {
		if t.kind == catchAll {
			return tokens[:i], tokens[i+1:], true
		}
	}
	return tokens, nil, false
}

// matchRun matches literals and parameters at path[start:] and returns where they end.
func matchRun(run []token, path []byte, start int) (end int, ok bool) {
	end = start
	for _, t := range run {
		switch t.kind {
		case literal:
			if len(path)-end < len(t.text) || string(path[end:end+len(t.text)]) != t.text {
				return 0, false
			}
			end += len(t.text)
		case param:
			// A parameter is a whole segment, so what follows it is '/' or the end:
			// taking the segment whole is the only way to match.
			n := bytes.IndexByte(path[end:], '/')
			if n < 0 {
				n = len(path) - end
			}
			if n == 0 {
				return 0, false
			}
			end += n
		}
	}
	return end, true
}
