package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// A route's "vars" is a lua-resty-expr (v1) expression, which APISIX checks after the
// path, method, remote address and host match:
//
//	[["arg_a", "==", "1"], ["http_x_user", "~~", "^adm"]]       every comparison holds
//	["OR", ["arg_a", "==", "1"], ["AND", [...], [...]]]          logical operators, nestable
//	["!AND", ...], ["!OR", ...]                                  negated logical operators
//	["arg_a", "!", "==", "1"]                                    a negated comparison
//	["arg_a", "1"]                                               shorthand for "=="
//
// ParseVars compiles it once per snapshot into an Expr tree; the worker's router evaluates
// the tree against each request.

// Logic is the operator of a logical Expr node.
type Logic uint8

// The logical operators; "!AND" and "!OR" are these with Expr.Negate set.
const (
	LogicAnd Logic = iota + 1
	LogicOr
)

// Op is a comparison operator.
type Op uint8

// The comparison operators of lua-resty-expr.
const (
	OpEqual        Op = iota + 1 // ==
	OpNotEqual                   // ~=
	OpGreater                    // >
	OpGreaterEqual               // >=
	OpLess                       // <
	OpLessEqual                  // <=
	OpMatch                      // ~~, a regular expression
	OpMatchFold                  // ~*, a case-insensitive regular expression
	OpIn                         // in, one of a list
	OpHas                        // has, one of the variable's values is the operand
	OpIPMatch                    // ipmatch, an address inside one of a list of CIDRs
)

var opNames = map[string]Op{
	"==": OpEqual, "~=": OpNotEqual, ">": OpGreater, ">=": OpGreaterEqual, "<": OpLess,
	"<=": OpLessEqual, "~~": OpMatch, "~*": OpMatchFold, "in": OpIn, "has": OpHas,
	"ipmatch": OpIPMatch,
}

// Expr is one node of a compiled vars expression: a logical operator over Operands, or
// (Logic 0) a comparison. It is immutable and safe for concurrent use.
type Expr struct {
	Logic    Logic
	Operands []Expr
	Cmp      Comparison
	// Negate inverts the node: "!AND", "!OR", or "!" before a comparison operator.
	Negate bool
}

// Comparison is one [var, op, value] test. Which operand field is set depends on Op.
type Comparison struct {
	Var Var
	Op  Op
	// Text is the operand of ==, ~= (unless Numeric or Absent) and has.
	Text string
	// Number is the operand of >, >=, <, <=, and of == and ~= when Numeric: the variable
	// is then read as a number, as Lua's tonumber does.
	Number  float64
	Numeric bool
	// Absent is set for == null and ~= null (or a missing value): the test is whether the
	// request lacks the variable.
	Absent bool
	// Texts and Numbers are the members of an "in" list.
	Texts   []string
	Numbers []float64
	// Regexp is the compiled operand of ~~ and ~* (which adds the (?i) flag).
	Regexp *regexp.Regexp
	// Prefixes are the operand of ipmatch; a plain address is a /32 or /128.
	Prefixes []netip.Prefix
}

// VarsError is a vars expression that does not compile. Its message is APISIX's
// ("failed to validate the 'vars' expression: invalid operator '='") followed by where
// the bad element is.
type VarsError struct {
	// Path locates the bad element: "vars[1][2]" for the operator of the second comparison.
	Path   string
	Reason string
}

func (e *VarsError) Error() string {
	return "failed to validate the 'vars' expression: " + e.Reason + " (at " + e.Path + ")"
}

// ParseVars compiles a route's vars value. An empty array or a missing value (nil or
// JSON null) gives a nil Expr, which every request satisfies. Regular expressions are
// compiled here, with Go's RE2 syntax, which lacks PCRE's look-arounds and back-references.
func ParseVars(raw json.RawMessage) (*Expr, error) { return parseVars(raw, ParseVar) }

// ParseResponseVars is ParseVars for an expression read once the response is known
// (response-rewrite's vars): its comparisons may also name the response's variables,
// status and sent_http_<name> (ParseResponseVar).
func ParseResponseVars(raw json.RawMessage) (*Expr, error) { return parseVars(raw, ParseResponseVar) }

// varParser reads a variable's name: ParseVar, or ParseResponseVar.
type varParser func(name string) (Var, error)

func parseVars(raw json.RawMessage, parse varParser) (*Expr, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, &VarsError{Path: "vars", Reason: "malformed JSON"}
	}
	rule, err := decodeVarsJSON(raw)
	if err != nil {
		return nil, &VarsError{Path: "vars", Reason: err.Error()}
	}
	list, ok := rule.([]any)
	if !ok {
		return nil, &VarsError{Path: "vars", Reason: "must be an array, got " + jsonTypeName(rule)}
	}
	if len(list) == 0 {
		return nil, nil
	}
	if _, nested := list[0].([]any); !nested {
		if _, isLogic := logicOp(list[0]); !isLogic {
			return nil, &VarsError{Path: "vars", Reason: `rule should be wrapped inside brackets: write [["arg_a", "==", "1"]], not ["arg_a", "==", "1"]`}
		}
	}
	e, err := compileRule(list, "vars", parse)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

func decodeVarsJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// compileRule compiles one array: a list of rules (all must hold), a logical operator
// and its operands, or a comparison, told apart by the first element as lua-resty-expr
// does.
func compileRule(rule []any, path string, parse varParser) (Expr, error) {
	if len(rule) == 0 {
		return Expr{}, &VarsError{Path: path, Reason: "rule too short: an empty array"}
	}
	if _, nested := rule[0].([]any); nested {
		return compileOperands(LogicAnd, false, rule, path, 0, parse)
	}
	if op, isLogic := logicOp(rule[0]); isLogic {
		if len(rule) < 3 {
			return Expr{}, &VarsError{Path: path, Reason: fmt.Sprintf("rule too short: %q needs at least two operands", op)}
		}
		negate := strings.HasPrefix(op, "!")
		logic := LogicAnd
		if strings.TrimPrefix(op, "!") == "OR" {
			logic = LogicOr
		}
		return compileOperands(logic, negate, rule[1:], path, 1, parse)
	}
	cmp, negate, err := compileComparison(rule, path, parse)
	if err != nil {
		return Expr{}, err
	}
	return Expr{Cmp: cmp, Negate: negate}, nil
}

func compileOperands(logic Logic, negate bool, operands []any, path string, first int, parse varParser) (Expr, error) {
	e := Expr{Logic: logic, Negate: negate, Operands: make([]Expr, len(operands))}
	for i, operand := range operands {
		at := fmt.Sprintf("%s[%d]", path, first+i)
		list, ok := operand.([]any)
		if !ok {
			return Expr{}, &VarsError{Path: at, Reason: "invalid expression: expected an array, got " + jsonTypeName(operand)}
		}
		sub, err := compileRule(list, at, parse)
		if err != nil {
			return Expr{}, err
		}
		e.Operands[i] = sub
	}
	return e, nil
}

// logicOp reports whether v is "AND", "OR", "!AND" or "!OR" in any case.
func logicOp(v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		return "", false
	}
	switch op := strings.ToUpper(s); op {
	case "AND", "OR", "!AND", "!OR":
		return op, true
	}
	return "", false
}

// compileComparison compiles [var, op, value], [var, "!", op, value] or [var, value].
func compileComparison(rule []any, path string, parse varParser) (Comparison, bool, error) {
	bad := func(i int, format string, args ...any) (Comparison, bool, error) {
		return Comparison{}, false, &VarsError{Path: fmt.Sprintf("%s[%d]", path, i), Reason: fmt.Sprintf(format, args...)}
	}
	if len(rule) > 4 {
		return bad(4, "invalid expression: a comparison has at most 4 elements, got %d", len(rule))
	}
	if len(rule) < 2 {
		return Comparison{}, false, &VarsError{Path: path, Reason: "invalid expression: expected [var, operator, value]"}
	}
	name, ok := rule[0].(string)
	if !ok {
		return bad(0, "invalid expression: the variable name must be a string, got %s", jsonTypeName(rule[0]))
	}
	v, err := parse(name)
	if err != nil {
		return bad(0, "%v", err)
	}
	negate := false
	opAt := 1
	if len(rule) == 4 {
		if rule[1] != "!" {
			return bad(1, `bad 'not' expression: the second of 4 elements must be "!", got %s`, describeValue(rule[1]))
		}
		negate, opAt = true, 2
	}
	opText, isString := rule[opAt].(string)
	op, known := opNames[strings.ToLower(opText)]
	var value any
	hasValue := len(rule) > opAt+1
	switch {
	case hasValue && !isString:
		return bad(opAt, "invalid operator: must be a string, got %s", jsonTypeName(rule[opAt]))
	case hasValue && !known:
		return bad(opAt, "invalid operator '%s'; operators are ==, ~=, >, >=, <, <=, ~~, ~*, in, has, ipmatch and ! before one", opText)
	case hasValue:
		value = rule[opAt+1]
	case !known && len(rule) == 2:
		// lua-resty-expr's shorthand: [var, value] means [var, "==", value].
		op, value = OpEqual, rule[1]
	case !known:
		return bad(opAt, "invalid expression: expected [var, operator, value]")
	}
	c := Comparison{Var: v, Op: op}
	if err := c.setOperand(value); err != nil {
		return bad(opAt+1, "%v", err)
	}
	return c, negate, nil
}

// setOperand checks value against c.Op and stores it in the field the operator reads.
func (c *Comparison) setOperand(value any) error {
	switch c.Op {
	case OpEqual, OpNotEqual:
		switch v := value.(type) {
		case nil:
			c.Absent = true
		case string:
			c.Text = v
		case json.Number:
			f, err := jsonNumber(v)
			if err != nil {
				return err
			}
			c.Number, c.Numeric = f, true
		default:
			return fmt.Errorf("invalid value: == and ~= compare with a string, a number or null, got %s", jsonTypeName(value))
		}
	case OpGreater, OpGreaterEqual, OpLess, OpLessEqual:
		f, ok := numberOperand(value)
		if !ok {
			return fmt.Errorf("invalid value: >, >=, < and <= compare with a number, got %s", describeValue(value))
		}
		c.Number = f
	case OpMatch, OpMatchFold:
		pattern, ok := value.(string)
		if !ok {
			return fmt.Errorf("invalid value: ~~ and ~* take a regular expression string, got %s", jsonTypeName(value))
		}
		if c.Op == OpMatchFold {
			pattern = "(?i)" + pattern
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return fmt.Errorf("invalid regular expression %q (RE2 syntax): %v", value, err)
		}
		c.Regexp = re
	case OpIn:
		list, ok := value.([]any)
		if !ok {
			return fmt.Errorf("invalid value: in takes an array of strings and numbers, got %s", jsonTypeName(value))
		}
		for i, member := range list {
			switch m := member.(type) {
			case string:
				c.Texts = append(c.Texts, m)
			case json.Number:
				f, err := jsonNumber(m)
				if err != nil {
					return fmt.Errorf("item %d: %w", i, err)
				}
				c.Numbers = append(c.Numbers, f)
			default:
				return fmt.Errorf("invalid value: item %d of an in list must be a string or a number, got %s", i, jsonTypeName(member))
			}
		}
	case OpHas:
		text, ok := value.(string)
		if !ok {
			return fmt.Errorf("invalid value: has takes a string, got %s", jsonTypeName(value))
		}
		c.Text = text
	case OpIPMatch:
		prefixes, err := ipmatchOperand(value)
		if err != nil {
			return err
		}
		c.Prefixes = prefixes
	default:
		panic(fmt.Sprintf("BUG: conf: operator %d has no operand rule", c.Op))
	}
	return nil
}

func jsonNumber(n json.Number) (float64, error) {
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil {
		return 0, fmt.Errorf("number out of range, got %s", n)
	}
	return f, nil
}

// numberOperand reads a JSON number or a string holding one (Lua's tonumber).
func numberOperand(value any) (float64, bool) {
	switch v := value.(type) {
	case json.Number:
		f, err := jsonNumber(v)
		return f, err == nil
	case string:
		return ParseVarNumber([]byte(v))
	}
	return 0, false
}

func ipmatchOperand(value any) ([]netip.Prefix, error) {
	var items []any
	switch v := value.(type) {
	case string:
		items = []any{v}
	case []any:
		items = v
	default:
		return nil, fmt.Errorf("invalid ip address: ipmatch takes an address or CIDR, or an array of them, got %s", jsonTypeName(value))
	}
	if len(items) == 0 {
		return nil, errors.New("invalid ip address: the ipmatch list is empty")
	}
	prefixes := make([]netip.Prefix, len(items))
	for i, item := range items {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("invalid ip address: item %d must be a string, got %s", i, jsonTypeName(item))
		}
		p, err := ParseAddrOrPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid ip address: item %d: %w", i, err)
		}
		prefixes[i] = p
	}
	return prefixes, nil
}

// ParseAddrOrPrefix reads "10.0.0.1", "10.0.0.0/8", "::1" or "fe80::/10" as a prefix (a
// plain address covers itself alone). The prefix is masked, so "10.1.2.3/8" covers
// 10.0.0.0/8, as nginx and resty.ipmatcher read it.
func ParseAddrOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("must be an IPv4 or IPv6 address or CIDR, got %q", s)
		}
		return p.Masked(), nil
	}
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("must be an IPv4 or IPv6 address or CIDR, got %q", s)
	}
	return netip.PrefixFrom(addr, addr.BitLen()), nil
}

// ParseVarNumber reads text as Lua's tonumber reads a string: a decimal number with
// optional sign, fraction and exponent, surrounded by optional white space. It allocates
// nothing, so the router may call it per request.
func ParseVarNumber(text []byte) (float64, bool) {
	text = bytes.TrimSpace(text)
	if !isDecimalNumber(text) {
		return 0, false
	}
	if len(text) <= 15 {
		// Fast path, exact: up to 15 digits fit a float64's 53-bit mantissa.
		if n, ok := smallInteger(text); ok {
			return n, true
		}
	}
	var buf [64]byte
	if len(text) > len(buf) {
		return 0, false
	}
	// strconv wants a string; the copy on the stack keeps text from escaping.
	f, err := strconv.ParseFloat(string(append(buf[:0], text...)), 64)
	return f, err == nil
}

func smallInteger(text []byte) (float64, bool) {
	neg := false
	switch text[0] {
	case '-':
		neg, text = true, text[1:]
	case '+':
		text = text[1:]
	}
	var n int64
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return float64(n), true
}

// isDecimalNumber accepts [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?.
func isDecimalNumber(s []byte) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// jsonTypeName names the JSON type of a value decoded with UseNumber.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	}
	return "object"
}

// describeValue shows a scalar with its type ("string \"x\""), other values by type.
func describeValue(v any) string {
	switch s := v.(type) {
	case string:
		return fmt.Sprintf("string %q", s)
	case json.Number:
		return "number " + s.String()
	}
	return jsonTypeName(v)
}
