package vars

import (
	"regexp"
	"strings"
	"testing"

	"gw/conf"
)

func TestExpand(t *testing.T) {
	plain := conf.TemplateSyntax{}
	header := conf.TemplateSyntax{Captures: true, UnknownIsEmpty: true}
	tests := []struct {
		template string
		syntax   conf.TemplateSyntax
		want     string
		resolved int
	}{
		{"constant", plain, "constant", 0},
		{"$remote_addr-$http_x_api_key", plain, "192.0.2.7-secret", 2},
		{"${arg_b}:${ cookie_theme }/$request_method", plain, "x y:dark/GET", 3},
		{"$http_missing|${http_none ?? dflt}", plain, "|dflt", 1},
		{"$http_missing $cookie_none", plain, " ", 0},
		{"[$http_x_empty]", plain, "[]", 1}, // sent empty: a value, as in APISIX
		{`\$uri $uri $ {`, plain, `\$uri /api/Users/42 $ {`, 1},
		{"$consumer_name@$host", plain, "jack@api.example.com", 2},
		{"$route_id/$service_name", plain, "r1/shop", 2},
		{"<$1>-<$2>-<$3>-$0", header, "<Users>-<42>-<>-/Users/42", 0},
		{"$helle", header, "", 0},
		{"${helle ?? fallback}", header, "fallback", 1},
	}
	ctx := newRequest(t, sample, nil)
	re := regexp.MustCompile(`/(\w+)/(\d+)(x)?`)
	subject := []byte(ctx.Path())
	r := Request{HTTP: ctx, RouteID: "r1", ServiceName: "shop", Consumer: "jack", Match: &Match{Subject: subject, Captures: re.FindSubmatchIndex(subject)}}
	for _, tt := range tests {
		tpl, err := conf.ParseTemplate(tt.template, tt.syntax)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", tt.template, err)
		}
		out, resolved := Expand([]byte("^"), &r, &tpl)
		if string(out) != "^"+tt.want || resolved != tt.resolved {
			t.Errorf("Expand(%q) = %q, %d; want %q, %d", tt.template, out, resolved, "^"+tt.want, tt.resolved)
		}
		// PartValue, part by part, reads the same, and so does PartHashValue for templates
		// without addresses or ports.
		var parts, hashParts []byte
		for i := range tpl.Parts {
			value, _ := PartValue(&r, &tpl.Parts[i], nil)
			parts = append(parts, value...)
			value, _ = PartHashValue(&r, &tpl.Parts[i], nil)
			hashParts = append(hashParts, value...)
		}
		if string(parts) != tt.want {
			t.Errorf("PartValue over %q = %q, want %q", tt.template, parts, tt.want)
		}
		if wantHash := strings.ReplaceAll(tt.want, "192.0.2.7", "\xc0\x00\x02\x07"); string(hashParts) != wantHash {
			t.Errorf("PartHashValue over %q = %q, want %q", tt.template, hashParts, wantHash)
		}
	}
	// Without a match every capture is empty.
	tpl, _ := conf.ParseTemplate("<$1>", header)
	if out, _ := Expand(nil, &Request{HTTP: ctx}, &tpl); string(out) != "<>" {
		t.Errorf("a capture without a match = %q, want <>", out)
	}
}

func TestExpandAllocatesNothing(t *testing.T) {
	ctx := newRequest(t, sample, nil)
	tpl, err := conf.ParseTemplate("$remote_addr $host ${arg_b} ${http_none ?? x} $server_port $cookie_theme", conf.TemplateSyntax{})
	if err != nil {
		t.Fatal(err)
	}
	r := Request{HTTP: ctx}
	buf := make([]byte, 0, 256)
	if allocs := testing.AllocsPerRun(100, func() { buf, _ = Expand(buf[:0], &r, &tpl) }); allocs != 0 {
		t.Errorf("Expand: %v allocations", allocs)
	}
}
