package textparse

import (
	"strings"
	"testing"
)

const good = `# HELP a_total Things.
# TYPE a_total counter
a_total{x="1",y="q\"\\\n"} 3
a_total{x="2"} 4 1700000000000
# HELP h A histogram.
# TYPE h histogram
h_bucket{le="1"} 1
h_bucket{le="+Inf"} 2
h_sum 7.5
h_count 2
# HELP g
# TYPE g gauge
g -1.5e3
`

func TestParseAccepts(t *testing.T) {
	fams, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := fams["a_total"].Sum("a_total", nil); got != 7 {
		t.Errorf("a_total sum = %g, want 7", got)
	}
	if got := fams["a_total"].Samples[0].Labels["y"]; got != "q\"\\\n" {
		t.Errorf("escaped label = %q", got)
	}
	if got := fams["h"].Sum("h_count", nil); got != 2 {
		t.Errorf("h_count = %g", got)
	}
	if fams["g"].Type != "gauge" || fams["g"].Help != "" || fams["a_total"].Help != "Things." {
		t.Errorf("metadata: %+v %+v", fams["g"], fams["a_total"])
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"no trailing newline", "# HELP g x\n# TYPE g gauge\ng 1", "end with a newline"},
		{"no HELP", "# TYPE g gauge\ng 1\n", "without HELP and TYPE"},
		{"no TYPE", "# HELP g x\ng 1\n", "without HELP and TYPE"},
		{"unknown type", "# HELP g x\n# TYPE g meter\ng 1\n", "unknown type"},
		{"family split", "# HELP g x\n# TYPE g gauge\ng 1\n# HELP k x\n# TYPE k gauge\nk 1\ng{a=\"b\"} 2\n", "two blocks"},
		{"duplicate series", "# HELP g x\n# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\"} 2\n", "twice"},
		{"unquoted label", "# HELP g x\n# TYPE g gauge\ng{a=1} 1\n", "not quoted"},
		{"bad escape", "# HELP g x\n# TYPE g gauge\ng{a=\"\\t\"} 1\n", "unknown escape"},
		{"bad value", "# HELP g x\n# TYPE g gauge\ng one\n", "bad value"},
		{"bad name", "# HELP 1g x\n", "bad metric name"},
		{"empty line", "# HELP g x\n\n", "empty line"},
		{"negative counter", "# HELP c x\n# TYPE c counter\nc -1\n", "negative counter"},
		{"not cumulative", "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", "not cumulative"},
		{"no +Inf", "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "+Inf"},
		{"+Inf not count", "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n", "equal _count"},
		{"no sum", "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n", "lacks"},
		{"other comment", "# hello\n", "HELP and TYPE"},
		{"label twice", "# HELP g x\n# TYPE g gauge\ng{a=\"1\",a=\"2\"} 1\n", "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
