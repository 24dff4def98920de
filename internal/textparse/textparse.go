// Package textparse is a strict parser of the Prometheus text exposition format (0.0.4),
// for tests: it accepts only what Prometheus itself would, and also insists on what gw
// promises beyond the format, namely a HELP and a TYPE line before every family, each
// family in one block, no series twice, and histograms whose buckets are cumulative and
// end in le="+Inf" equal to _count. Parse returns every sample, so a test can sum them.
package textparse

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sample is one line of a family: its full name (with _bucket, _sum or _count for a
// histogram), its labels and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Family is one metric family.
type Family struct {
	Name    string
	Help    string
	Type    string // counter, gauge, histogram, summary or untyped
	Samples []Sample
}

// Parse checks text and returns its families by name.
func Parse(text string) (map[string]*Family, error) {
	families := map[string]*Family{}
	var current *Family
	closed := map[string]bool{}
	seen := map[string]bool{}
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the exposition must end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	open := func(name string, line int) (*Family, error) {
		if current != nil && current.Name == name {
			return current, nil
		}
		if closed[name] {
			return nil, fmt.Errorf("line %d: family %s appears in two blocks", line, name)
		}
		if current != nil {
			closed[current.Name] = true
		}
		current = &Family{Name: name}
		families[name] = current
		return current, nil
	}
	for i, line := range lines {
		n := i + 1
		if !utf8.ValidString(line) {
			return nil, fmt.Errorf("line %d: not UTF-8", n)
		}
		if line == "" {
			return nil, fmt.Errorf("line %d: empty line", n)
		}
		if strings.HasPrefix(line, "#") {
			fields := strings.SplitN(line, " ", 4)
			if len(fields) < 3 || fields[0] != "#" || (fields[1] != "HELP" && fields[1] != "TYPE") {
				return nil, fmt.Errorf("line %d: comments other than HELP and TYPE are not expected: %q", n, line)
			}
			if !validName(fields[2]) {
				return nil, fmt.Errorf("line %d: bad metric name %q", n, fields[2])
			}
			f, err := open(fields[2], n)
			if err != nil {
				return nil, err
			}
			if len(f.Samples) > 0 {
				return nil, fmt.Errorf("line %d: %s after samples of %s", n, fields[1], f.Name)
			}
			rest := ""
			if len(fields) == 4 {
				rest = fields[3]
			}
			if fields[1] == "HELP" {
				if f.Help != "" {
					return nil, fmt.Errorf("line %d: second HELP for %s", n, f.Name)
				}
				f.Help = "\x00" + rest // marks HELP seen, even an empty one
				continue
			}
			if f.Type != "" {
				return nil, fmt.Errorf("line %d: second TYPE for %s", n, f.Name)
			}
			switch rest {
			case "counter", "gauge", "histogram", "summary", "untyped":
				f.Type = rest
			default:
				return nil, fmt.Errorf("line %d: unknown type %q", n, rest)
			}
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", n, err, line)
		}
		family := s.Name
		if current != nil && current.Type == "histogram" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if strings.TrimSuffix(s.Name, suffix) == current.Name && s.Name != current.Name {
					family = current.Name
				}
			}
		}
		f, err := open(family, n)
		if err != nil {
			return nil, err
		}
		if f.Help == "" || f.Type == "" {
			return nil, fmt.Errorf("line %d: sample of %s without HELP and TYPE before it", n, family)
		}
		if f.Type == "histogram" && s.Name == family {
			return nil, fmt.Errorf("line %d: histogram sample %s needs _bucket, _sum or _count", n, s.Name)
		}
		if f.Type == "counter" && s.Value < 0 {
			return nil, fmt.Errorf("line %d: negative counter", n)
		}
		id := seriesID(s)
		if seen[id] {
			return nil, fmt.Errorf("line %d: series %s appears twice", n, id)
		}
		seen[id] = true
		f.Samples = append(f.Samples, s)
	}
	for _, f := range families {
		f.Help = strings.TrimPrefix(f.Help, "\x00")
		if f.Type == "histogram" {
			if err := checkHistogram(f); err != nil {
				return nil, err
			}
		}
	}
	return families, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func validLabelName(s string) bool {
	return validName(s) && !strings.Contains(s, ":")
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	if !validName(s.Name) {
		return s, fmt.Errorf("bad metric name %q", s.Name)
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				return s, fmt.Errorf("label without =")
			}
			name := rest[:eq]
			if !validLabelName(name) {
				return s, fmt.Errorf("bad label name %q", name)
			}
			if _, dup := s.Labels[name]; dup {
				return s, fmt.Errorf("label %s twice", name)
			}
			rest = rest[eq+1:]
			if !strings.HasPrefix(rest, `"`) {
				return s, fmt.Errorf("label %s: value not quoted", name)
			}
			var value strings.Builder
			j := 1
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' {
					j++
					if j == len(rest) {
						return s, fmt.Errorf("label %s: escape at end", name)
					}
					switch rest[j] {
					case '\\':
						value.WriteByte('\\')
					case '"':
						value.WriteByte('"')
					case 'n':
						value.WriteByte('\n')
					default:
						return s, fmt.Errorf(`label %s: unknown escape \%c`, name, rest[j])
					}
					continue
				}
				value.WriteByte(rest[j])
			}
			if j == len(rest) {
				return s, fmt.Errorf("label %s: unterminated value", name)
			}
			s.Labels[name] = value.String()
			rest = rest[j+1:]
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
			} else if !strings.HasPrefix(rest, "}") {
				return s, fmt.Errorf("after label %s: expected , or }", name)
			}
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return s, fmt.Errorf("expected a space before the value")
	}
	fields := strings.Split(rest[1:], " ")
	if len(fields) > 2 || fields[0] == "" {
		return s, fmt.Errorf("expected a value and an optional timestamp")
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	if len(fields) == 2 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			return s, fmt.Errorf("bad timestamp %q", fields[1])
		}
	}
	return s, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "_xXpP") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity") {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return v, nil
}

func seriesID(s Sample) string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, ",%s=%q", k, s.Labels[k])
	}
	return b.String()
}

// checkHistogram checks every series of a histogram: buckets cumulative and sorted by le,
// a +Inf bucket equal to _count, and a _sum.
func checkHistogram(f *Family) error {
	type series struct {
		les          []float64
		counts       []float64
		sum, count   float64
		hasSum, hasN bool
	}
	all := map[string]*series{}
	get := func(s Sample) *series {
		rest := Sample{Labels: map[string]string{}}
		for k, v := range s.Labels {
			if k != "le" {
				rest.Labels[k] = v
			}
		}
		id := seriesID(rest)
		if all[id] == nil {
			all[id] = &series{}
		}
		return all[id]
	}
	for _, s := range f.Samples {
		switch s.Name {
		case f.Name + "_bucket":
			le, ok := s.Labels["le"]
			if !ok {
				return fmt.Errorf("%s: bucket without le", f.Name)
			}
			bound, err := parseValue(le)
			if err != nil {
				return fmt.Errorf("%s: le %q: %w", f.Name, le, err)
			}
			h := get(s)
			h.les = append(h.les, bound)
			h.counts = append(h.counts, s.Value)
		case f.Name + "_sum":
			h := get(s)
			h.sum, h.hasSum = s.Value, true
		case f.Name + "_count":
			h := get(s)
			h.count, h.hasN = s.Value, true
		}
	}
	for id, h := range all {
		if !h.hasSum || !h.hasN || len(h.les) == 0 {
			return fmt.Errorf("%s: series %s lacks buckets, _sum or _count", f.Name, id)
		}
		for i := 1; i < len(h.les); i++ {
			if !(h.les[i] > h.les[i-1]) || h.counts[i] < h.counts[i-1] {
				return fmt.Errorf("%s: series %s: buckets not sorted or not cumulative at le=%g", f.Name, id, h.les[i])
			}
		}
		last := len(h.les) - 1
		if !math.IsInf(h.les[last], 1) || h.counts[last] != h.count {
			return fmt.Errorf("%s: series %s: last bucket must be le=\"+Inf\" and equal _count (%g), got le=%g %g",
				f.Name, id, h.count, h.les[last], h.counts[last])
		}
	}
	return nil
}

// Sum adds the values of the samples named name whose labels include every pair in match.
func (f *Family) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range f.Samples {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}
