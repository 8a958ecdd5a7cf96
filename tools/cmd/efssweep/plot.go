package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotFiles draws the points of earlier runs' JSON lines.
func plotFiles(files []string, x, path string) error {
	var results []point
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for dec.More() {
			var pt point
			if err := dec.Decode(&pt); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			results = append(results, pt)
		}
	}
	return plotThroughput(results, x, path)
}

// axis says what a chart plots decisions/s against, and what tells its
// lines apart.
type axis struct {
	label  string
	x      func(point) float64
	series func(point) string
}

var axes = map[string]axis{
	"latency": {"latency per file-system operation (ms; write-class where split)",
		func(r point) float64 { return float64(r.WriteLatency.Microseconds()) / 1000 },
		func(r point) string { return plural(r.Procs, "process", "processes") }},
	"shards": {"SQLITE_SHARDS (files)",
		func(r point) float64 { return float64(r.Shards) },
		func(r point) string {
			return fmt.Sprintf("%s × %s, %s, %s%s", plural(r.Procs, "process", "processes"), plural(r.Clients, "client", "clients"), r.Journal, r.Latency, buffering(r))
		}},
	"clients": {"concurrent requests in one process",
		func(r point) float64 { return float64(r.Clients) },
		func(r point) string {
			gc := "group commit"
			if r.Batch == 1 {
				gc = "one transaction a decision"
			}
			return fmt.Sprintf("%s, %s, %d keys%s", gc, r.Latency, r.Keys, buffering(r))
		}},
}

func buffering(r point) string {
	if r.BufferWrites {
		return ", writes buffered"
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// plotThroughput draws decisions/s (log scale) against x (latency, shards
// or clients), one line per series of the axis.
func plotThroughput(results []point, x, path string) error {
	ax, ok := axes[x]
	if !ok {
		return fmt.Errorf("-x %q: want latency, shards or clients", x)
	}
	bySeries := map[string]plotter.XYs{}
	for _, r := range results {
		if r.PerSecond <= 0 {
			continue
		}
		bySeries[ax.series(r)] = append(bySeries[ax.series(r)], plotter.XY{X: ax.x(r), Y: r.PerSecond})
	}
	names := make([]string, 0, len(bySeries))
	for s := range bySeries {
		names = append(names, s)
	}
	sort.Strings(names)

	p := plot.New()
	p.Title.Text = "Rate limit decisions per second on an EFS model (latencyfs)"
	p.X.Label.Text = ax.label
	p.Y.Label.Text = "decisions per second, whole database (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(10), vg.Points(10)
	if x != "latency" { // rising lines: the legend goes in the top left, below the title
		p.Legend.Top, p.Legend.YOffs = true, -vg.Points(10)
	}
	palette := []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
	}
	for i, name := range names {
		pts := bySeries[name]
		sort.Slice(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		line.Color, points.Color = c, c
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(name, line, points)
	}
	if x != "latency" {
		p.Y.Max *= 4 // room for the legend above the lines
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
