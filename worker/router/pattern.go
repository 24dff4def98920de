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

// matchTokens reports whether path matches tokens whole. It allocates nothing; a
// catch-all backtracks over the split points, of which real paths have few.
func matchTokens(tokens []token, path []byte) bool {
	for len(tokens) > 0 {
		t := tokens[0]
		tokens = tokens[1:]
		switch t.kind {
		case literal:
			if len(path) < len(t.text) || string(path[:len(t.text)]) != t.text {
				return false
			}
			path = path[len(t.text):]
		case param:
			// A parameter is a whole segment, so what follows it is '/' or the end:
			// taking the segment whole is the only way to match.
			end := bytes.IndexByte(path, '/')
			if end < 0 {
				end = len(path)
			}
			if end == 0 {
				return false
			}
			path = path[end:]
		case catchAll:
			if len(tokens) == 0 {
				return true
			}
			for i := len(path); i >= 0; i-- {
				if matchTokens(tokens, path[i:]) {
					return true
				}
			}
			return false
		}
	}
	return len(path) == 0
}
