package conf

import (
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Environment variables in config.yaml, as APISIX's cli resolves them in its config.yaml
// (resolve_conf_var in apisix/cli/file.lua): ${{NAME}} is the variable's value and
// ${{NAME:=default}} the value or, when the variable is unset, the default. The double
// braces keep nginx's $var and ${var} free. The rules follow APISIX:
//   - Substitution happens after YAML parsing, in every string value and mapping key at any
//     depth, so a reference in a comment does nothing and the YAML structure cannot change.
//   - Several references in one value are each substituted; the result is not scanned again.
//   - A value that was substituted and is then a number, true or false as a whole takes that
//     type: `worker_processes: ${{WORKERS:=2}}` is the integer 2.
//   - A variable set to the empty string is used as the empty string, not the default.
//   - Spaces inside the braces and around the default are ignored.
//   - An unset variable without a default is an error naming the variable and the key.
//
// gw is stricter than APISIX in one way: text that starts a reference (${{) but is not one
// of the two forms is an error rather than left as it is, so a typo cannot reach a key as
// literal text. The master reads its environment once, at start: a reload uses the same
// values, as the variables of a running process cannot change from outside.

// envRefStart opens a reference; envRefEnd closes it.
const (
	envRefStart = "${{"
	envRefEnd   = "}}"
)

// envLookup is how the loader reads variables; tests set them with t.Setenv.
var envLookup = os.LookupEnv

// substituteEnv replaces the references in every string scalar under n, reporting each
// problem with its key path. Alias targets are visited once, so a value an alias shares is
// not substituted twice (a variable's value may itself contain ${{).
func (l *loader) substituteEnv(n *yaml.Node, path string, seen map[*yaml.Node]bool) {
	n = yamlDeref(n)
	if seen[n] {
		return
	}
	seen[n] = true
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamlDeref(n.Content[i])
			if k.Kind == yaml.ScalarNode && !seen[k] {
				seen[k] = true
				l.substituteScalar(k, path)
			}
			l.substituteEnv(n.Content[i+1], memberPath(path, k.Value), seen)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			l.substituteEnv(item, path+"["+strconv.Itoa(i)+"]", seen)
		}
	case yaml.ScalarNode:
		l.substituteScalar(n, path)
	}
}

// substituteScalar substitutes one string scalar in place and gives it the type its new
// text has, as APISIX's tonumber and "true"/"false" checks do.
func (l *loader) substituteScalar(n *yaml.Node, path string) {
	if n.Tag != "!!str" || !strings.Contains(n.Value, envRefStart) {
		return
	}
	value, ok := l.expandEnv(n.Value, n.Line, path)
	if !ok {
		return
	}
	n.Value = value
	switch {
	case value == "true" || value == "false":
		n.Tag = "!!bool"
	case isYAMLInt(value):
		n.Tag = "!!int"
	case isYAMLFloat(value):
		n.Tag = "!!float"
	}
}

// expandEnv returns s with its references replaced, or reports the first bad one. The
// file's own text and defaults must not join into a new ${{ (as "$" then a default of
// "{{X}}" would): that would read as a reference in any copy of the resolved config,
// such as one `gwctl` writes back. A variable's value may hold anything.
func (l *loader) expandEnv(s string, line int, path string) (string, bool) {
	var b, fileText strings.Builder // fileText is b with every variable's value left out
	for {
		start := strings.Index(s, envRefStart)
		if start < 0 {
			b.WriteString(s)
			fileText.WriteString(s)
			break
		}
		b.WriteString(s[:start])
		fileText.WriteString(s[:start])
		rest := s[start+len(envRefStart):]
		end := strings.Index(rest, envRefEnd)
		if end < 0 {
			l.errorf(line, path, "%q opens an environment variable with ${{ but has no closing }}; write ${{NAME}} or ${{NAME:=default}}", s)
			return "", false
		}
		ref := s[start : start+len(envRefStart)+end+len(envRefEnd)]
		value, fromEnv, ok := l.resolveEnvRef(ref, rest[:end], line, path)
		if !ok {
			return "", false
		}
		b.WriteString(value)
		if fromEnv {
			fileText.WriteByte(0)
		} else {
			fileText.WriteString(value)
		}
		s = rest[end+len(envRefEnd):]
	}
	if strings.Contains(fileText.String(), envRefStart) {
		l.errorf(line, path, "the text around its ${{...}} references joins into a new ${{; rewrite the value")
		return "", false
	}
	return b.String(), true
}

// resolveEnvRef resolves the inside of one reference, "NAME" or "NAME:=default".
// fromEnv says whether the value came from the environment rather than the default.
func (l *loader) resolveEnvRef(ref, inside string, line int, path string) (value string, fromEnv, ok bool) {
	name, def, hasDefault := strings.Cut(inside, ":=")
	name = strings.TrimSpace(name)
	if !isEnvName(name) {
		l.errorf(line, path, "%s is not an environment variable reference; write ${{NAME}} or ${{NAME:=default}}, NAME being letters, digits and _ and not starting with a digit", ref)
		return "", false, false
	}
	def = strings.TrimSpace(def)
	if strings.Contains(def, envRefStart) {
		l.errorf(line, path, "%s: a default cannot hold another ${{...}} reference", ref)
		return "", false, false
	}
	if v, set := envLookup(name); set {
		return v, true, true
	}
	if hasDefault {
		return def, false, true
	}
	l.errorf(line, path, "environment variable %s is not set (referenced as %s); set it, or give a default with ${{%s:=value}}", name, ref, name)
	return "", false, false
}

// isYAMLInt and isYAMLFloat say whether text is a number as YAML would read it unquoted,
// so a substituted value reaches the decoders exactly as the same text written in the
// file would.
func isYAMLInt(s string) bool {
	var v yaml.Node
	return yaml.Unmarshal([]byte(s), &v) == nil && len(v.Content) == 1 && v.Content[0].Tag == "!!int"
}

func isYAMLFloat(s string) bool {
	var v yaml.Node
	return yaml.Unmarshal([]byte(s), &v) == nil && len(v.Content) == 1 && v.Content[0].Tag == "!!float"
}
