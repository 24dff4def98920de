package conf

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func cmpExpr(v Var, op Op, set func(*Comparison)) Expr {
	c := Comparison{Var: v, Op: op}
	if set != nil {
		set(&c)
	}
	return Expr{Cmp: c}
}

func and(operands ...Expr) Expr { return Expr{Logic: LogicAnd, Operands: operands} }

func TestParseVarsAccepts(t *testing.T) {
	argA := Var{Kind: VarArg, Name: "a"}
	text := func(s string) func(*Comparison) { return func(c *Comparison) { c.Text = s } }
	tests := []struct {
		vars string
		want *Expr
	}{
		{``, nil},
		{`null`, nil},
		{`[]`, nil},
		{`[["arg_a", "==", "1"]]`, ptrTo(and(cmpExpr(argA, OpEqual, text("1"))))},
		{`[["arg_a", "1"]]`, ptrTo(and(cmpExpr(argA, OpEqual, text("1"))))},
		{`[["arg_a", "~=", 2.5]]`, ptrTo(and(cmpExpr(argA, OpNotEqual, func(c *Comparison) { c.Number, c.Numeric = 2.5, true })))},
		{`[["arg_a", "==", null]]`, ptrTo(and(cmpExpr(argA, OpEqual, func(c *Comparison) { c.Absent = true })))},
		{`[["arg_a", "=="]]`, ptrTo(and(cmpExpr(argA, OpEqual, func(c *Comparison) { c.Absent = true })))},
		{`[["arg_a", ">", "10"]]`, ptrTo(and(cmpExpr(argA, OpGreater, func(c *Comparison) { c.Number = 10 })))},
		{`[["arg_a", ">=", -1e2]]`, ptrTo(and(cmpExpr(argA, OpGreaterEqual, func(c *Comparison) { c.Number = -100 })))},
		{`[["arg_a", "<", " 3 "]]`, ptrTo(and(cmpExpr(argA, OpLess, func(c *Comparison) { c.Number = 3 })))},
		{`[["arg_a", "<=", ".5"]]`, ptrTo(and(cmpExpr(argA, OpLessEqual, func(c *Comparison) { c.Number = 0.5 })))},
		{`[["arg_a", "IN", ["x", 1]]]`, ptrTo(and(cmpExpr(argA, OpIn, func(c *Comparison) { c.Texts, c.Numbers = []string{"x"}, []float64{1} })))},
		{`[["arg_a", "in", []]]`, ptrTo(and(cmpExpr(argA, OpIn, nil)))},
		{`[["arg_a", "has", "x"]]`, ptrTo(and(cmpExpr(argA, OpHas, text("x"))))},
		{`[["remote_addr", "ipmatch", "10.1.2.3/8"]]`, ptrTo(and(cmpExpr(Var{Kind: VarRemoteAddr}, OpIPMatch, func(c *Comparison) {
			c.Prefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		})))},
		{`[["remote_addr", "ipmatch", ["::1", "127.0.0.1"]]]`, ptrTo(and(cmpExpr(Var{Kind: VarRemoteAddr}, OpIPMatch, func(c *Comparison) {
			c.Prefixes = []netip.Prefix{netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("127.0.0.1/32")}
		})))},
		{`[["http_X_Api_Key", "!", "==", "k"]]`, ptrTo(and(Expr{Cmp: Comparison{Var: Var{Kind: VarHeader, Name: "X-Api-Key"}, Op: OpEqual, Text: "k"}, Negate: true}))},
		{`["!or", ["cookie_s", "==", "1"], ["uri", "==", "/"]]`, &Expr{Logic: LogicOr, Negate: true, Operands: []Expr{
			cmpExpr(Var{Kind: VarCookie, Name: "s"}, OpEqual, text("1")),
			cmpExpr(Var{Kind: VarURI}, OpEqual, text("/")),
		}}},
		{`[[["scheme", "==", "https"]], ["AND", ["host", "==", "a"], ["server_port", "==", 80]]]`, ptrTo(and(
			and(cmpExpr(Var{Kind: VarScheme}, OpEqual, text("https"))),
			and(cmpExpr(Var{Kind: VarHost}, OpEqual, text("a")),
				cmpExpr(Var{Kind: VarServerPort}, OpEqual, func(c *Comparison) { c.Number, c.Numeric = 80, true })),
		))},
	}
	for _, tt := range tests {
		got, err := ParseVars(json.RawMessage(tt.vars))
		if err != nil {
			t.Errorf("ParseVars(%s): %v", tt.vars, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseVars(%s) = %+v, want %+v", tt.vars, got, tt.want)
		}
	}
}

func TestParseVarsEveryVariable(t *testing.T) {
	for name, want := range map[string]Var{
		"uri": {Kind: VarURI}, "request_uri": {Kind: VarRequestURI}, "args": {Kind: VarArgs},
		"query_string": {Kind: VarArgs}, "host": {Kind: VarHost}, "remote_addr": {Kind: VarRemoteAddr},
		"remote_port": {Kind: VarRemotePort}, "server_addr": {Kind: VarServerAddr},
		"server_port": {Kind: VarServerPort}, "request_method": {Kind: VarRequestMethod},
		"scheme": {Kind: VarScheme}, "http_user_agent": {Kind: VarHeader, Name: "User-Agent"},
		"arg_Page_No": {Kind: VarArg, Name: "Page_No"}, "cookie_Sess-ID": {Kind: VarCookie, Name: "Sess-ID"},
	} {
		e, err := ParseVars(json.RawMessage(`[["` + name + `", "==", "x"]]`))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := e.Operands[0].Cmp.Var; got != want {
			t.Errorf("%s = %+v, want %+v", name, got, want)
		}
	}
}

func TestParseVarsRejects(t *testing.T) {
	tests := []struct{ vars, want string }{
		{`{}`, `must be an array, got object (at vars)`},
		{`"x"`, `must be an array, got string (at vars)`},
		{`[`, `malformed JSON (at vars)`},
		{`["arg_a", "==", "1"]`, `rule should be wrapped inside brackets`},
		{`[["arg_a", "=", "1"]]`, `invalid operator '='; operators are`},
		{`[["arg_a", "=", "1"]]`, `(at vars[0][1])`},
		{`[["arg_a", "==", "1"], ["arg_b", "like", "1"]]`, `invalid operator 'like'; operators are ==, ~=, >, >=, <, <=, ~~, ~*, in, has, ipmatch and ! before one (at vars[1][1])`},
		{`[["arg_a", 1, "1"]]`, `invalid operator: must be a string, got number (at vars[0][1])`},
		{`[["arg_a", "x", "==", "1"]]`, `bad 'not' expression: the second of 4 elements must be "!", got string "x" (at vars[0][1])`},
		{`[["arg_a", "!", "==", "1", "2"]]`, `a comparison has at most 4 elements, got 5 (at vars[0][4])`},
		{`[["arg_a"]]`, `invalid expression: expected [var, operator, value] (at vars[0])`},
		{`[[]]`, `rule too short: an empty array (at vars[0])`},
		{`[[1, "==", "1"]]`, `the variable name must be a string, got number (at vars[0][0])`},
		{`[["foo", "==", "1"]]`, `unknown variable "foo"; supported: uri,`},
		{`[["http_", "==", "1"]]`, `invalid variable "http_": the name after "http_" is missing (at vars[0][0])`},
		{`[["arg_", "==", "1"]]`, `the name after "arg_" is missing`},
		{`[["cookie_", "==", "1"]]`, `the name after "cookie_" is missing`},
		{`[["arg_a", "==", true]]`, `== and ~= compare with a string, a number or null, got boolean (at vars[0][2])`},
		{`[["arg_a", "~=", ["1"]]]`, `got array`},
		{`[["arg_a", ">", "ten"]]`, `>, >=, < and <= compare with a number, got string "ten" (at vars[0][2])`},
		{`[["arg_a", "<", null]]`, `compare with a number, got null`},
		{`[["arg_a", "<="]]`, `compare with a number, got null (at vars[0][2])`},
		{`[["arg_a", "~~", "("]]`, `invalid regular expression "(" (RE2 syntax)`},
		{`[["arg_a", "~*", "(?<=a)b"]]`, `invalid regular expression "(?<=a)b"`},
		{`[["arg_a", "~~", 1]]`, `~~ and ~* take a regular expression string, got number`},
		{`[["arg_a", "in", "1"]]`, `in takes an array of strings and numbers, got string`},
		{`[["arg_a", "in", ["1", null]]]`, `item 1 of an in list must be a string or a number, got null`},
		{`[["arg_a", "has", ["1"]]]`, `has takes a string, got array`},
		{`[["remote_addr", "ipmatch", []]]`, `invalid ip address: the ipmatch list is empty`},
		{`[["remote_addr", "ipmatch", ["10.0.0.0/33"]]]`, `invalid ip address: item 0: must be an IPv4 or IPv6 address or CIDR, got "10.0.0.0/33"`},
		{`[["remote_addr", "ipmatch", "localhost"]]`, `got "localhost"`},
		{`[["remote_addr", "ipmatch", "fe80::1%eth0"]]`, `got "fe80::1%eth0"`},
		{`[["remote_addr", "ipmatch", [1]]]`, `item 0 must be a string, got number`},
		{`[["remote_addr", "ipmatch", {}]]`, `ipmatch takes an address or CIDR, or an array of them, got object`},
		{`["OR", ["arg_a", "==", "1"]]`, `rule too short: "OR" needs at least two operands (at vars)`},
		{`["AND", ["arg_a", "==", "1"], "x"]`, `expected an array, got string (at vars[2])`},
		{`[["arg_a", "==", "1"], "x"]`, `expected an array, got string (at vars[1])`},
		{`["OR", ["arg_a", "==", "1"], ["!AND", ["arg_b", "==", "1"], ["arg_c", "=", "1"]]]`, `invalid operator '=';`},
		{`["OR", ["arg_a", "==", "1"], ["!AND", ["arg_b", "==", "1"], ["arg_c", "=", "1"]]]`, `(at vars[2][2][1])`},
		{`[["arg_a", "==", 1e999]]`, `number out of range, got 1e999`},
	}
	for _, tt := range tests {
		_, err := ParseVars(json.RawMessage(tt.vars))
		if err == nil {
			t.Errorf("ParseVars(%s) succeeded, want an error containing %q", tt.vars, tt.want)
			continue
		}
		var ve *VarsError
		if !errors.As(err, &ve) {
			t.Errorf("ParseVars(%s) error %T, want *VarsError", tt.vars, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "failed to validate the 'vars' expression: ") || !strings.Contains(msg, tt.want) {
			t.Errorf("ParseVars(%s) error = %q, want APISIX's prefix and %q", tt.vars, msg, tt.want)
		}
	}
}

// TestDecodeRouteVars checks vars through the route decoder: the schema wants an array,
// and a bad expression is refused in APISIX's words, without "invalid configuration".
func TestDecodeRouteVars(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"uri":"/a","service_id":1,"vars":[["arg_a", "==", "1"]]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Vars) != `[["arg_a","==","1"]]` {
		t.Errorf("Vars = %s, want the compact array", r.Vars)
	}
	tests := []struct{ body, want string }{
		{`{"uri":"/a","service_id":1,"vars":{"a":1}}`, `invalid configuration: property "vars" validation failed: wrong type: expected array, got object`},
		{`{"uri":"/a","service_id":1,"vars":[["arg_a","=","1"]]}`, `failed to validate the 'vars' expression: invalid operator '='; operators are ==, ~=, >, >=, <, <=, ~~, ~*, in, has, ipmatch and ! before one (at vars[0][1])`},
		{`{"uri":"/a*b/c","service_id":1}`, `invalid configuration: property "uri" validation failed: '*' is allowed only at the end of the path or at the start of a segment`},
		{`{"uris":["/ok","/a/**/b"],"service_id":1}`, `invalid configuration: property "uris[1]" validation failed: '*' is allowed only`},
	}
	for _, tt := range tests {
		_, err := DecodeRoute([]byte(tt.body))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("DecodeRoute(%s) error = %v, want it to start with %q", tt.body, err, tt.want)
		}
	}
	for _, uri := range []string{"/a/*", "/a*", "/a/*/b", "/files/*name", "/user/:id/*action", "/*"} {
		if _, err := DecodeRoute([]byte(`{"uri":"` + uri + `","service_id":1}`)); err != nil {
			t.Errorf("uri %q: %v", uri, err)
		}
	}
}

func TestRemoteAddrPrefixes(t *testing.T) {
	tests := []struct {
		route Route
		want  []netip.Prefix
	}{
		{Route{}, nil},
		{Route{RemoteAddr: "127.0.0.1"}, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		{Route{RemoteAddrs: []string{"10.1.0.0/16", "::1", "fe80::1/10"}}, []netip.Prefix{
			netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fe80::/10")}},
	}
	for _, tt := range tests {
		got, err := tt.route.RemoteAddrPrefixes()
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("RemoteAddrPrefixes(%+v) = %v, %v; want %v", tt.route, got, err, tt.want)
		}
	}
	if _, err := (&Route{RemoteAddrs: []string{"nope"}}).RemoteAddrPrefixes(); err == nil {
		t.Error("RemoteAddrPrefixes accepted \"nope\"")
	}
}

func TestParseVarNumber(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true}, {"+7", 7, true}, {" 3 ", 3, true},
		{"1.5", 1.5, true}, {".5", 0.5, true}, {"5.", 5, true}, {"1e3", 1000, true}, {"2E-1", 0.2, true},
		{"123456789012345678", 123456789012345678, true},
		{"", 0, false}, {" ", 0, false}, {"abc", 0, false}, {"1a", 0, false}, {"--1", 0, false},
		{".", 0, false}, {"1e", 0, false}, {"e5", 0, false}, {"0x10", 0, false}, {"inf", 0, false},
		{"NaN", 0, false}, {"1 2", 0, false}, {"1e999", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseVarNumber([]byte(tt.in))
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("ParseVarNumber(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	in := []byte("12345.678")
	if allocs := testing.AllocsPerRun(100, func() { ParseVarNumber(in) }); allocs != 0 {
		t.Errorf("ParseVarNumber: %v allocations, want 0", allocs)
	}
}

// FuzzParseVars: any input either compiles or fails with a *VarsError; nothing panics.
// The committed corpus is in testdata/fuzz/FuzzParseVars.
func FuzzParseVars(f *testing.F) {
	for _, seed := range []string{
		`[["arg_a", "==", "1"]]`,
		`["OR", ["http_x", "~~", "^a"], ["!AND", ["cookie_c", "in", ["1", 2]], ["remote_addr", "ipmatch", "10.0.0.0/8"]]]`,
		`[["arg_n", "!", ">=", "1e3"], ["uri", "has", "x"]]`,
		`[["host", "==", null], [["scheme", "https"]]]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseVars(data)
		if err != nil {
			var ve *VarsError
			if !errors.As(err, &ve) {
				t.Fatalf("ParseVars(%q): error %T %v, want *VarsError", data, err, err)
			}
			return
		}
		if e != nil {
			checkCompiled(t, e, data)
		}
	})
}

// checkCompiled asserts the invariants the router relies on: every comparison has a
// known variable and the operand field its operator reads.
func checkCompiled(t *testing.T, e *Expr, data []byte) {
	switch e.Logic {
	case LogicAnd, LogicOr:
		if len(e.Operands) == 0 {
			t.Fatalf("ParseVars(%q): a logical node without operands", data)
		}
		for i := range e.Operands {
			checkCompiled(t, &e.Operands[i], data)
		}
		return
	case 0:
	default:
		t.Fatalf("ParseVars(%q): logic %d", data, e.Logic)
	}
	c := &e.Cmp
	if !c.Var.Kind.known() {
		t.Fatalf("ParseVars(%q): variable kind %d", data, c.Var.Kind)
	}
	switch c.Op {
	case OpMatch, OpMatchFold:
		if c.Regexp == nil {
			t.Fatalf("ParseVars(%q): a regexp operator without a Regexp", data)
		}
	case OpIPMatch:
		if len(c.Prefixes) == 0 {
			t.Fatalf("ParseVars(%q): ipmatch without prefixes", data)
		}
	case OpEqual, OpNotEqual, OpGreater, OpGreaterEqual, OpLess, OpLessEqual, OpIn, OpHas:
	default:
		t.Fatalf("ParseVars(%q): operator %d", data, c.Op)
	}
}
