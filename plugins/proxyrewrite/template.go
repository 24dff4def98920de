package proxyrewrite

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
)

// Templates are conf.Templates, expanded by gw/plugins/vars. The uri refuses a variable
// gw cannot read; header values take regex_uri's captures and read an unknown variable
// as empty, as APISIX does (an empty value then removes the header).
var (
	uriSyntax    = conf.TemplateSyntax{}
	headerSyntax = conf.TemplateSyntax{Captures: true, UnknownIsEmpty: true}
)

// requestOf is what pc's variables are read from; the route's, service's and consumer's
// names only when a template reads them (vars.ReadsNames).
func (c *Config) requestOf(pc *plugins.Ctx) vars.Request {
	r := vars.Request{HTTP: pc.Request}
	if c.readsNames {
		r.Consumer = pc.Consumer
		if route := pc.Route; route != nil {
			r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = route.ID, route.Name, route.ServiceID, route.ServiceName
		}
	}
	return r
}

// templatesReadNames reports whether any of c's templates reads the route's, service's
// or consumer's names.
func (c *Config) templatesReadNames() bool {
	reads := func(t *conf.Template) bool {
		for i := range t.Parts {
			if vars.ReadsNames(&t.Parts[i].Var) {
				return true
			}
		}
		return false
	}
	if c.URI != nil && reads(c.URI) {
		return true
	}
	for _, list := range [][]headerValue{c.Add, c.Set} {
		for i := range list {
			for j := range list[i].values {
				if reads(&list[i].values[j]) {
					return true
				}
			}
		}
	}
	return false
}

// expandURI appends t's value to dst with every '?' in a variable's value written %3F, as
// APISIX escapes uri's variables: only a '?' written in the template starts the query.
func expandURI(dst []byte, r *vars.Request, t *conf.Template) []byte {
	for i := range t.Parts {
		p := &t.Parts[i]
		if p.Kind == conf.PartText {
			dst = append(dst, p.Text...)
			continue
		}
		start := len(dst)
		dst, _ = vars.AppendPart(dst, r, p)
		dst = escapeQuestionMarks(dst, start)
	}
	return dst
}

// escapeQuestionMarks rewrites each '?' of dst[start:] as "%3F", in place: the value is
// moved right from its end, so no second buffer is needed.
func escapeQuestionMarks(dst []byte, start int) []byte {
	n := 0
	for _, c := range dst[start:] {
		if c == '?' {
			n++
		}
	}
	if n == 0 {
		return dst
	}
	end := len(dst)
	dst = append(dst, make([]byte, 2*n)...)
	for w, i := len(dst), end-1; i >= start; i-- {
		if dst[i] == '?' {
			w -= 3
			copy(dst[w:], "%3F")
		} else {
			w--
			dst[w] = dst[i]
		}
	}
	return dst
}

// parseReplacement parses ngx.re.sub's template: $0..$N or ${N} for captures, $$ for a
// dollar sign; any other '$' is an error, as in ngx.re.sub.
func parseReplacement(s string, numSubexp int) (conf.Template, error) {
	var t conf.Template
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			t.Parts = append(t.Parts, conf.TemplatePart{Kind: conf.PartText, Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			text.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			text.WriteByte('$')
			i++
			continue
		}
		n, end, ok := captureAt(s, i)
		if !ok {
			return t, fmt.Errorf("invalid capturing variable name at %q (use $1 or ${1}, and $$ for a dollar sign)", s[i:])
		}
		if n > numSubexp {
			return t, fmt.Errorf("%s: the regex has only %d capture(s)", s[i:end], numSubexp)
		}
		flush()
		t.Parts = append(t.Parts, conf.TemplatePart{Kind: conf.PartCapture, Capture: n})
		i = end - 1
	}
	flush()
	return t, nil
}

// captureAt reads "$N" or "${N}" (spaces inside the braces ignored) at s[i] and returns
// N and where it ends.
func captureAt(s string, i int) (n, end int, ok bool) {
	j := i + 1
	var digits string
	if j < len(s) && s[j] == '{' {
		closing := strings.IndexByte(s[j:], '}')
		if closing < 0 {
			return 0, 0, false
		}
		digits, end = strings.TrimSpace(s[j+1:j+closing]), j+closing+1
	} else {
		end = j
		for end < len(s) && isDigit(s[end]) {
			end++
		}
		digits = s[j:end]
	}
	if !isDigits(digits) {
		return 0, 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		n = math.MaxInt // past any regex's captures
	}
	return n, end, true
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

func isWordChar(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}
