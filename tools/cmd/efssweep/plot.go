package main

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotThroughput draws decisions/s (log scale) against the write latency of
// each model, one line per number of processes.
func plotThroughput(results []point, path string) error {
	byProcs := map[int]plotter.XYs{}
	for _, r := range results {
		if r.PerSecond <= 0 {
			continue
		}
		byProcs[r.Procs] = append(byProcs[r.Procs], plotter.XY{X: float64(r.WriteLatency.Microseconds()) / 1000, Y: r.PerSecond})
	}
	procs := make([]int, 0, len(byProcs))
	for p := range byProcs {
		procs = append(procs, p)
	}
	sort.Ints(procs)

	p := plot.New()
	p.Title.Text = "Rate limit decisions per second on an EFS model (latencyfs)"
	p.X.Label.Text = "latency per file-system operation (ms; write-class where split)"
	p.Y.Label.Text = "decisions per second, whole database (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(10), vg.Points(10)
	palette := []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
	}
	for i, n := range procs {
		pts := byProcs[n]
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
		label := fmt.Sprintf("%d processes", n)
		if n == 1 {
			label = "1 process"
		}
		p.Legend.Add(label, line, points)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
