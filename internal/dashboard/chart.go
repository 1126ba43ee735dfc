package dashboard

import (
	"fmt"
	"time"
)

// chart is a small bar chart drawn as inline SVG on the server: one
// column per bucket, each a stack of series (drawn bottom up).
type chart struct {
	Label  string // for screen readers
	Width  float64
	Height float64
	Max    int
	Bars   []bar
	Series []chartSeries // for the legend
	Ticks  []tick
}

type chartSeries struct {
	Name  string
	Class string
	Total int
}

type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type tick struct {
	X    float64
	Text string
}

const (
	chartWidth  = 600
	chartHeight = 120
	chartTop    = 4
	chartBottom = 16 // room for the time labels
)

// newChart draws the series (same length each) whose first bucket starts
// at start.
func newChart(label string, start time.Time, bucket time.Duration, series []chartSeries, values [][]int) chart {
	c := chart{Label: label, Width: chartWidth, Height: chartHeight, Series: series}
	n := 0
	for _, v := range values {
		n = max(n, len(v))
	}
	if n == 0 {
		return c
	}
	for i := range n {
		sum := 0
		for _, v := range values {
			if i < len(v) {
				sum += v[i]
			}
		}
		c.Max = max(c.Max, sum)
	}
	for i := range series {
		for _, v := range values[i] {
			c.Series[i].Total += v
		}
	}
	plot := float64(chartHeight - chartTop - chartBottom)
	w := float64(chartWidth) / float64(n)
	scale := 0.0
	if c.Max > 0 {
		scale = plot / float64(c.Max)
	}
	for i := range n {
		y := float64(chartHeight - chartBottom)
		t := start.Add(time.Duration(i) * bucket).UTC()
		for s, v := range values {
			if i >= len(v) || v[i] == 0 {
				continue
			}
			h := max(float64(v[i])*scale, 1)
			y -= h
			c.Bars = append(c.Bars, bar{X: float64(i)*w + 0.5, Y: y, W: max(w-1, 1), H: h, Class: series[s].Class,
				Title: fmt.Sprintf("%s %s: %d", t.Format("15:04"), series[s].Name, v[i])})
		}
	}
	for i := 0; i < n; i += max(n/6, 1) {
		c.Ticks = append(c.Ticks, tick{X: float64(i)*w + 1, Text: start.Add(time.Duration(i) * bucket).UTC().Format("15:04")})
	}
	return c
}
