package conf

import (
	"strconv"
	"strings"
	"testing"
)

// render writes a Template for comparison: text as it is, <var> for a variable (<?> for
// the zero Var), <var??fallback>, <$N> for a capture, '|' between parts.
func render(t Template) string {
	var parts []string
	for _, p := range t.Parts {
		switch p.Kind {
		case PartText:
			parts = append(parts, p.Text)
		case PartCapture:
			parts = append(parts, "<$"+strconv.Itoa(p.Capture)+">")
		case PartVar:
			name := p.Var.String()
			if name == "" {
				name = "?"
			}
			if p.HasFallback {
				name += "??" + p.Fallback
			}
			parts = append(parts, "<"+name+">")
		}
	}
	return strings.Join(parts, "|")
}

func TestParseTemplateAccepts(t *testing.T) {
	plain := TemplateSyntax{}
	header := TemplateSyntax{Captures: true, UnknownIsEmpty: true}
	tests := []struct {
		in     string
		syntax TemplateSyntax
		want   string
	}{
		{"", plain, ""},
		{"constant", plain, "constant"},
		{"$remote_addr", plain, "<remote_addr>"},
		{"$remote_addr $http_x", plain, "<remote_addr>| |<http_x>"},
		{"${remote_addr}-${arg_a}", plain, "<remote_addr>|-|<arg_a>"},
		{"user:$http_x_user_id!", plain, "user:|<http_x_user_id>|!"},
		{"$cookie_sid$route_id", plain, "<cookie_sid>|<route_id>"},
		{"${uri}.b", plain, "<uri>|.b"},
		{"${ http_x_y ?? none }", plain, "<http_x_y??none>"},
		{"${arg_a??}", plain, "<arg_a??>"},
		{"${arg_a ?? b ?? c}", plain, "<arg_a??b>"}, // APISIX takes the second piece
		{"${arg_a ?? x y}", plain, "<arg_a??x y>"},
		{"$query_string", plain, "<args>"},
		// A '$' that starts no reference is text, and so is an escaped one.
		{"$", plain, "$"},
		{"a$ b", plain, "a$ b"},
		{"$$uri", plain, "$|<uri>"},
		{`\$uri`, plain, `\$uri`},
		{`\$uri $uri`, plain, `\$uri |<uri>`},
		{"${}", plain, "${}"},
		{"${ }", plain, "${ }"},
		{"${unclosed", plain, "${unclosed"},
		{"${unclosed $uri", plain, "${unclosed |<uri>"},
		{"cost: 5$", plain, "cost: 5$"},
		{"$-x", plain, "$-x"},
		// Header values: captures, and unknown variables that read as nothing.
		{"$1-$uri", header, "<$1>|-|<uri>"},
		{"${1}x$0", header, "<$1>|x|<$0>"},
		{"$1.html", header, "<$1>|.html"},
		{"$12abc", header, "<$12>|abc"},
		{"$99", header, "<$99>"},
		{"$helle", header, "<?>"},
		{"[$helle]", header, "[|<?>|]"},
		{"${helle ?? x}", header, "<???x>"},
		{"$http_", header, "<?>"},
		{"$uri.html", header, "<?>"},
	}
	for _, tt := range tests {
		got, err := ParseTemplate(tt.in, tt.syntax)
		if err != nil {
			t.Errorf("ParseTemplate(%q, %+v): %v", tt.in, tt.syntax, err)
			continue
		}
		if r := render(got); r != tt.want {
			t.Errorf("ParseTemplate(%q, %+v) = %s, want %s", tt.in, tt.syntax, r, tt.want)
		}
	}
}

func TestParseTemplateRejects(t *testing.T) {
	plain := TemplateSyntax{}
	header := TemplateSyntax{Captures: true, UnknownIsEmpty: true}
	tests := []struct {
		in     string
		syntax TemplateSyntax
		want   string
	}{
		{"$nope", plain, `unknown variable "nope"; supported: uri,`},
		{"a ${nope} b", plain, `unknown variable "nope"`},
		{"${nope ?? x}", plain, `unknown variable "nope"`},
		{"$uri.b", plain, `unknown variable "uri.b"; supported: uri, `},
		{"$uri.b", plain, `(a '.' continues a $name: write ${uri} when text follows)`},
		{"$x.y", plain, `unknown variable "x.y"; supported:`},
		{"$http_", plain, `invalid variable "http_": the name after "http_" is missing`},
		{"${post_arg.name[}", plain, `invalid variable "post_arg.name[": the '[' at offset 4 is not closed`},
		{"${post_arg.a..b}", header, `invalid variable "post_arg.a..b": recursive descent`}, // not unknown: refused even here
		{"$1", plain, `$1: captures are filled by regex_uri and usable in proxy-rewrite's header values only`},
		{"${2}", plain, `$2: captures are filled by regex_uri`},
		{"$100", header, `$100: capture number out of range (at most 99)`},
		{"$99999999999999999999", header, `capture number out of range`},
		{"${1 ?? x}", header, `${1 ?? ...}: a capture takes no fallback`},
	}
	for _, tt := range tests {
		got, err := ParseTemplate(tt.in, tt.syntax)
		if err == nil {
			t.Errorf("ParseTemplate(%q, %+v) = %s, want an error containing %q", tt.in, tt.syntax, render(got), tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTemplate(%q, %+v) error = %q, want it to contain %q", tt.in, tt.syntax, err, tt.want)
		}
	}
}

// FuzzParseTemplate: nothing panics, and what parses keeps the invariants expansion relies
// on: text parts are not empty and never adjacent, variables are known (or, with
// UnknownIsEmpty, the zero Var), captures only where allowed and in range, and the text
// parts appear in the input in order.
func FuzzParseTemplate(f *testing.F) {
	for _, seed := range []string{
		"$remote_addr $http_x", "${ arg_a ?? b }", `\$uri $`, "$1.html", "${unclosed $uri", "$helle", "${}",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, in string, headerSyntax bool) {
		syntax := TemplateSyntax{Captures: headerSyntax, UnknownIsEmpty: headerSyntax}
		tpl, err := ParseTemplate(in, syntax)
		if err != nil {
			return
		}
		rest := in
		for i, p := range tpl.Parts {
			switch p.Kind {
			case PartText:
				if p.Text == "" || i > 0 && tpl.Parts[i-1].Kind == PartText {
					t.Fatalf("ParseTemplate(%q): empty or adjacent text parts: %s", in, render(tpl))
				}
				at := strings.Index(rest, p.Text)
				if at < 0 {
					t.Fatalf("ParseTemplate(%q): text %q is not in the input in order", in, p.Text)
				}
				rest = rest[at+len(p.Text):]
			case PartVar:
				if !p.Var.Kind.known() && !(headerSyntax && p.Var == Var{}) {
					t.Fatalf("ParseTemplate(%q): variable %+v", in, p.Var)
				}
			case PartCapture:
				if !headerSyntax || p.Capture < 0 || p.Capture > maxCapture {
					t.Fatalf("ParseTemplate(%q): capture %d", in, p.Capture)
				}
			default:
				t.Fatalf("ParseTemplate(%q): part kind %d", in, p.Kind)
			}
		}
		if !strings.Contains(in, "$") && (len(tpl.Parts) > 1 || in != "" && tpl.Parts[0].Text != in) {
			t.Fatalf("ParseTemplate(%q) without a '$' = %s", in, render(tpl))
		}
	})
}
