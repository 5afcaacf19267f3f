package views

import (
	"fmt"
	"strconv"
	"strings"
)

// ChartBucket is one period's deliveries by outcome.
type ChartBucket struct {
	Label                         string // axis label, "" to leave the tick unlabelled
	Long                          string // the period in full, for the tooltip
	Accepted, Duplicate, Rejected int64
}

// Chart is a stacked bar chart of deliveries by outcome, with the duplicate rate as a
// line, laid out for an SVG viewBox.
type Chart struct {
	ID      string
	Title   string
	Desc    string // a sentence that says what the chart shows, for screen readers
	Width   int
	Height  int
	PlotTop int
	PlotBot int
	Left    int
	Right   int
	Bars    []ChartBar
	XLabels []ChartLabel
	YLabels []ChartLabel
	Rate    string // polyline points of the duplicate rate, "" when there were no keys
	Empty   bool
}

// ChartBar is one period's stacked bar.
type ChartBar struct {
	X, W  string
	Segs  []ChartSeg
	Title string // the period and its counts
}

// ChartSeg is one outcome's part of a bar.
type ChartSeg struct {
	Y, H  string
	Class string
}

// ChartLabel is an axis label at a position.
type ChartLabel struct {
	X, Y string
	Text string
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// NewChart lays out buckets as a chart. id must be unique on the page.
func NewChart(id, title string, buckets []ChartBucket) Chart {
	c := Chart{ID: id, Title: title, Width: 720, Height: 220, PlotTop: 12, PlotBot: 190, Left: 44, Right: 680}
	var peak, acc, dup, rej int64
	for _, b := range buckets {
		peak = max(peak, b.Accepted+b.Duplicate+b.Rejected)
		acc, dup, rej = acc+b.Accepted, dup+b.Duplicate, rej+b.Rejected
	}
	c.Empty = peak == 0
	c.Desc = fmt.Sprintf("%s: %d accepted, %d duplicate, %d rejected deliveries in %d periods.", title, acc, dup, rej, len(buckets))
	if acc+dup > 0 {
		c.Desc += fmt.Sprintf(" Duplicate rate %s.", Percent(dup, acc+dup))
	}
	top := niceCeil(peak)
	plotH := float64(c.PlotBot - c.PlotTop)
	for i := 0; i <= 4; i++ {
		v := top * int64(i) / 4
		y := float64(c.PlotBot) - plotH*float64(i)/4
		c.YLabels = append(c.YLabels, ChartLabel{X: strconv.Itoa(c.Left - 6), Y: f1(y), Text: strconv.FormatInt(v, 10)})
	}
	if len(buckets) == 0 {
		return c
	}
	slot := float64(c.Right-c.Left) / float64(len(buckets))
	w := max(slot*0.72, 1)
	var rate []string
	for i, b := range buckets {
		x := float64(c.Left) + slot*float64(i) + (slot-w)/2
		bar := ChartBar{X: f1(x), W: f1(w)}
		y := float64(c.PlotBot)
		for _, s := range []struct {
			n     int64
			class string
		}{{b.Accepted, "accepted"}, {b.Duplicate, "duplicate"}, {b.Rejected, "rejected"}} {
			if s.n == 0 {
				continue
			}
			h := plotH * float64(s.n) / float64(top)
			y -= h
			bar.Segs = append(bar.Segs, ChartSeg{Y: f1(y), H: f1(h), Class: s.class})
		}
		bar.Title = fmt.Sprintf("%s: %d accepted, %d duplicate, %d rejected", b.Long, b.Accepted, b.Duplicate, b.Rejected)
		if b.Accepted+b.Duplicate > 0 {
			bar.Title += ", duplicate rate " + Percent(b.Duplicate, b.Accepted+b.Duplicate)
			r := float64(b.Duplicate) / float64(b.Accepted+b.Duplicate)
			rate = append(rate, f1(x+w/2)+","+f1(float64(c.PlotBot)-plotH*r))
		}
		c.Bars = append(c.Bars, bar)
		if b.Label != "" {
			c.XLabels = append(c.XLabels, ChartLabel{X: f1(x + w/2), Y: strconv.Itoa(c.PlotBot + 18), Text: b.Label})
		}
	}
	if len(rate) > 1 {
		c.Rate = strings.Join(rate, " ")
	}
	return c
}

// niceCeil rounds n up to a number that divides into four readable ticks.
func niceCeil(n int64) int64 {
	if n <= 4 {
		return 4
	}
	step := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if s := step * m; s*4 >= n {
				return s * 4
			}
		}
		step *= 10
	}
}

// Percent formats part/whole as a percentage with one decimal, "–" when whole is 0.
func Percent(part, whole int64) string {
	if whole == 0 {
		return "–"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + " %"
}
