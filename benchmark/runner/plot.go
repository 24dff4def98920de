package main

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// chartSpec is one chart: a figure against worker count, one line per scenario, as the
// APISIX benchmark page draws them.
type chartSpec struct {
	suffix string
	title  string
	yLabel string
	value  func(Summary) float64
}

var (
	rpsChart = chartSpec{"rps", "Requests per second", "requests/s", func(s Summary) float64 { return s.RPS }}
	p99Chart = chartSpec{"p99", "p99 latency", "µs", func(s Summary) float64 { return s.P99US }}
)

// chartLines collects, per scenario, the (workers, value) points of the measured rows.
func chartLines(r *Report, c chartSpec) map[string]plotter.XYs {
	lines := map[string]plotter.XYs{}
	for _, row := range r.Rows {
		if row.Skipped != "" {
			continue
		}
		for _, sc := range row.Scenarios {
			lines[sc.Name] = append(lines[sc.Name], plotter.XY{X: float64(row.Workers), Y: c.value(sc.Median)})
		}
	}
	return lines
}

func drawChart(r *Report, c chartSpec, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (%d CPUs, %s)", c.title, r.Machine.Cores, r.Machine.Date.Format("2006-01-02"))
	p.X.Label.Text = "worker processes"
	p.Y.Label.Text = c.yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	lines := chartLines(r, c)
	var args []any
	for _, name := range scenarioOrder {
		if pts, ok := lines[name]; ok {
			args = append(args, name, pts)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("no measured row to draw")
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	// A single worker count would give a zero-width axis.
	p.X.Min, p.X.Max = p.X.Min-0.5, p.X.Max+0.5
	p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		var ticks []plot.Tick
		for _, row := range r.Rows {
			ticks = append(ticks, plot.Tick{Value: float64(row.Workers), Label: fmt.Sprint(row.Workers)})
		}
		return ticks
	})
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
