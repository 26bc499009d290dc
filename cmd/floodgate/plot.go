//go:build plot

package main

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/floodgate/floodgate/algo"
)

// plotBuilt says that this floodgate draws --plot: it was built with the
// plot tag.
const plotBuilt = true

// The picture's geometry: 10 inches wide, a header for the title and the
// legend, and a panel per key. A PNG has 100 pixels per inch, so it is
// 1000 pixels wide and 80 + 220 per key high.
const (
	plotWidth        = 10 * vg.Inch
	plotHeaderHeight = 0.8 * vg.Inch
	plotPanelHeight  = 2.2 * vg.Inch
	plotDPI          = 100
)

var (
	admittedColor = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	refusedColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	levelColor    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	limitColor    = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}
)

// plotStyles are the looks of a panel's four elements, shared by the
// panels and the legend.
type plotStyles struct {
	admitted, refused draw.GlyphStyle
	level, limit      draw.LineStyle
}

func newPlotStyles() plotStyles {
	return plotStyles{
		admitted: draw.GlyphStyle{Color: admittedColor, Radius: vg.Points(1.8), Shape: draw.CircleGlyph{}},
		refused:  draw.GlyphStyle{Color: refusedColor, Radius: vg.Points(2.6), Shape: draw.CrossGlyph{}},
		level:    draw.LineStyle{Color: levelColor, Width: vg.Points(0.8)},
		limit:    draw.LineStyle{Color: limitColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}},
	}
}

// writePlot draws the keys of rs that --plot shows, the busiest nKeys, to
// w as a picture in format ("svg" or "png"). policy is in the title; clock
// says the trace's times are Unix times (from an access log), labelled as
// UTC times of day, rather than seconds since any origin.
func writePlot(w io.Writer, format string, rs *runStats, nKeys int, policy algo.Policy, clock bool) error {
	keys := rs.busiest(nKeys)
	sty := newPlotStyles()
	axis := newTimeAxis(rs, clock)
	panels := make([][]*plot.Plot, len(keys))
	for i, ks := range keys {
		panels[i] = []*plot.Plot{newPanel(ks, axis, i == len(keys)-1, sty, float64(policy.Burst()))}
	}
	height := plotHeaderHeight + plotPanelHeight*vg.Length(len(keys))
	canvas, err := newPlotCanvas(format, height)
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawPlotHeader(draw.Crop(dc, 0, 0, height-plotHeaderHeight, 0), sty, policy, rs, len(keys))
	drawPanels(draw.Crop(dc, 0, 0, 0, -plotHeaderHeight), panels)
	return writeCanvas(w, canvas, format)
}

// timeAxis is the time axis that every panel shares: its range in
// seconds, its ticks, and the label under the last panel.
type timeAxis struct {
	min, max float64
	ticker   plot.Ticker
	label    string
}

// newTimeAxis returns the axis from rs's first event to its last (a
// second either side of a single instant): seconds since any origin, or
// with clock UTC times of day, the day in the label when there is one.
func newTimeAxis(rs *runStats, clock bool) timeAxis {
	a := timeAxis{min: float64(rs.first) / 1e9, max: float64(rs.last) / 1e9, ticker: plot.DefaultTicks{}, label: "t (seconds)"}
	if a.max-a.min < 1e-9 {
		a.min, a.max = a.min-1, a.max+1
	}
	if clock {
		a.ticker = clockTicks{}
		a.label = "time (UTC)"
		if first, last := time.Unix(0, rs.first).UTC(), time.Unix(0, rs.last).UTC(); first.YearDay() == last.YearDay() && first.Year() == last.Year() {
			a.label = "time (UTC) on " + first.Format("Monday 2 January 2006")
		}
	}
	return a
}

// newPanel returns the panel of the key ks: its title, a grid, the burst
// as a dashed line, the units in use as a step line, and the admitted and
// refused events. Only the last panel labels the time axis.
func newPanel(ks *keyStats, axis timeAxis, last bool, sty plotStyles, burst float64) *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font = sansFont(11, xfont.WeightNormal)
	p.X.Label.TextStyle.Font = sansFont(10, xfont.WeightNormal)
	p.Y.Label.TextStyle.Font = sansFont(10, xfont.WeightNormal)
	p.X.Tick.Label.Font = sansFont(9, xfont.WeightNormal)
	p.Y.Tick.Label.Font = sansFont(9, xfont.WeightNormal)
	p.Title.Text = fmt.Sprintf("%s: %s, %s refused", plotKey(ks.key), countOf(ks.events, "event"), withCommas(ks.refused))
	p.Title.Padding = vg.Points(3)
	p.Y.Label.Text = "units in use"
	p.X.Tick.Marker = axis.ticker
	if last {
		p.X.Label.Text = axis.label
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xe0}
	grid.Horizontal.Color = color.Gray{Y: 0xe0}
	p.Add(grid)

	level, admitted, refused := panelSeries(ks.points)
	limit := &plotter.Line{XYs: plotter.XYs{{X: axis.min, Y: burst}, {X: axis.max, Y: burst}}, LineStyle: sty.limit}
	steps := &plotter.Line{XYs: level, StepStyle: plotter.PostStep, LineStyle: sty.level}
	p.Add(limit, steps)
	if len(admitted) > 0 {
		p.Add(&plotter.Scatter{XYs: admitted, GlyphStyle: sty.admitted})
	}
	if len(refused) > 0 {
		p.Add(&plotter.Scatter{XYs: refused, GlyphStyle: sty.refused})
	}
	p.X.Min, p.X.Max = axis.min, axis.max
	p.Y.Min, p.Y.Max = 0, math.Max(burst*1.15, 1)
	return p
}

// panelSeries returns what a panel draws of a key's points: the level of
// units in use, and the admitted and the refused events. The level holds
// from one event to the next, unless the key is back to none in use (its
// reset) before that.
func panelSeries(points []plotPoint) (level, admitted, refused plotter.XYs) {
	level = make(plotter.XYs, 0, len(points)+len(points)/4)
	for j, pt := range points {
		xy := plotter.XY{X: float64(pt.t) / 1e9, Y: float64(pt.used)}
		level = append(level, xy)
		if pt.allowed {
			admitted = append(admitted, xy)
		} else {
			refused = append(refused, xy)
		}
		if pt.used > 0 && (j+1 == len(points) || int64(pt.reset) < points[j+1].t-pt.t) {
			level = append(level, plotter.XY{X: float64(pt.t+int64(pt.reset)) / 1e9, Y: 0})
		}
	}
	return level, admitted, refused
}

// newPlotCanvas returns a canvas of the picture's width and height for
// format, "svg" or "png".
func newPlotCanvas(format string, height vg.Length) (vg.CanvasWriterTo, error) {
	switch format {
	case "svg":
		return vgsvg.New(plotWidth, height), nil
	case "png":
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(plotWidth, height), vgimg.UseDPI(plotDPI))}, nil
	}
	return nil, fmt.Errorf("unknown picture format %q", format)
}

// drawPanels draws the panels on c, one above the other.
func drawPanels(c draw.Canvas, panels [][]*plot.Plot) {
	if len(panels) == 0 {
		return
	}
	tiles := draw.Tiles{
		Rows: len(panels), Cols: 1,
		PadX: vg.Points(4), PadY: vg.Points(10),
		PadLeft: vg.Points(8), PadRight: vg.Points(16), PadBottom: vg.Points(6),
	}
	canvases := plot.Align(panels, tiles, c)
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
}

// writeCanvas writes the picture on canvas to w in format. An SVG names
// its fonts without fallbacks, and a viewer without Liberation Sans would
// use its default font, often a serif one: writeCanvas adds Arial and
// Helvetica, which have the same metrics, so the text still fits.
func writeCanvas(w io.Writer, canvas vg.CanvasWriterTo, format string) error {
	if format != "svg" {
		_, err := canvas.WriteTo(w)
		return err
	}
	var svg bytes.Buffer
	if _, err := canvas.WriteTo(&svg); err != nil {
		return err
	}
	_, err := w.Write(bytes.ReplaceAll(svg.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")))
	return err
}

// drawPlotHeader draws the title, a line of totals and the legend.
func drawPlotHeader(c draw.Canvas, sty plotStyles, policy algo.Policy, rs *runStats, nKeys int) {
	title := text.Style{
		Color:   color.Black,
		Font:    sansFont(14, xfont.WeightBold),
		XAlign:  draw.XCenter,
		YAlign:  draw.YTop,
		Handler: plot.DefaultTextHandler,
	}
	center := (c.Min.X + c.Max.X) / 2
	top := c.Max.Y - vg.Points(6)
	c.FillText(title, vg.Point{X: center, Y: top}, "floodgate simulate --policy '"+policy.String()+"'")

	total := rs.total()
	sub := title
	sub.Font = sansFont(10, xfont.WeightNormal)
	sub.Color = color.Gray{Y: 0x40}
	which := fmt.Sprintf("the %d keys with the most events, of %s", nKeys, withCommas(int64(len(rs.keys))))
	if nKeys == len(rs.keys) {
		which = "every key: " + countOf(int64(nKeys), "key")
	}
	c.FillText(sub, vg.Point{X: center, Y: top - vg.Points(19)},
		fmt.Sprintf("%s; in all %s, %s refused", which, countOf(total.events, "event"), withCommas(total.refused)))
	drawPlotLegend(c, center, sty, policy)
}

// drawPlotLegend draws the legend on c, one entry per cell of a row
// centred on center.
func drawPlotLegend(c draw.Canvas, center vg.Length, sty plotStyles, policy algo.Policy) {
	name := "burst"
	switch policy.Algorithm() {
	case algo.LeakyBucket:
		name = "capacity"
	case algo.SlidingLog, algo.SlidingWindow, algo.FixedWindow:
		name = "limit"
	}
	entries := []struct {
		label string
		thumb plot.Thumbnailer
	}{
		{"admitted", &plotter.Scatter{GlyphStyle: sty.admitted}},
		{"refused", &plotter.Scatter{GlyphStyle: sty.refused}},
		{"units in use (" + name + " − remaining)", &plotter.Line{LineStyle: sty.level}},
		{name + " = " + withCommas(policy.Burst()), &plotter.Line{LineStyle: sty.limit}},
	}
	legends := make([]plot.Legend, len(entries))
	var width vg.Length
	const gap = 30 // points between entries, room for a font wider than Liberation Sans
	for i, e := range entries {
		l := plot.NewLegend()
		l.TextStyle.Font = sansFont(10, xfont.WeightNormal)
		l.Left, l.Top = true, true
		l.ThumbnailWidth = vg.Points(22)
		l.Add(e.label, e.thumb)
		legends[i] = l
		width += l.Rectangle(c).Size().X + gap
	}
	row := draw.Crop(c, 0, 0, 0, -(c.Max.Y - c.Min.Y - vg.Points(18)))
	row.Min.X = center - (width-gap)/2
	for i := range legends {
		legends[i].Draw(row)
		row.Min.X += legends[i].Rectangle(row).Size().X + gap
	}
}

// sansFont returns Liberation Sans (which gonum/plot embeds) of size
// points and weight.
func sansFont(size vg.Length, weight xfont.Weight) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans", Weight: weight}, size)
}

// plotKey returns key as a panel's title shows it: as it is when it is
// printable (spaces included), else quoted in Go syntax; cut to 60
// characters.
func plotKey(key string) string {
	s := key
	if key == "" || key[0] == '"' || !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) {
		s = strconv.Quote(key)
	}
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

// countOf returns n and noun, in the plural unless n is 1.
func countOf(n int64, noun string) string {
	if n != 1 {
		noun += "s"
	}
	return withCommas(n) + " " + noun
}

// busiest returns the n keys with the most events, most first, ties in
// key order.
func (rs *runStats) busiest(n int) []*keyStats {
	return rs.leading(n, func(a, b *keyStats) int {
		return cmp.Or(cmp.Compare(b.events, a.events), cmp.Compare(a.key, b.key))
	})
}

// clockTicks marks a time axis of Unix seconds at round UTC times: every 1,
// 2, 5, 10, 15 or 30 seconds or minutes, 1, 2, 3, 6 or 12 hours, or 1, 2,
// 4, 8... days, the shortest that gives at most 10 ticks, labelled with the time of day (the
// date for days). Spans under 5 seconds get DefaultTicks, labelled to the
// millisecond.
type clockTicks struct{}

func (clockTicks) Ticks(min, max float64) []plot.Tick {
	const day = 86400
	if max-min < 5 {
		ticks := plot.DefaultTicks{}.Ticks(min, max)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = unixTime(ticks[i].Value).Format("15:04:05.000")
			}
		}
		return ticks
	}
	step := float64(day)
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600} {
		if (max-min)/s <= 10 {
			step = s
			break
		}
	}
	for step >= day && (max-min)/step > 10 {
		step *= 2
	}
	layout := "15:04:05"
	switch {
	case step >= day:
		layout = "2 Jan"
	case unixTime(min).YearDay() != unixTime(max).YearDay():
		layout = "2 Jan 15:04"
	case step >= 60:
		layout = "15:04"
	}
	var ticks []plot.Tick
	for v := math.Ceil(min/step) * step; v <= max; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: unixTime(v).Format(layout)})
	}
	return ticks
}

// unixTime returns the UTC time sec seconds after the Unix epoch.
func unixTime(sec float64) time.Time {
	whole := math.Floor(sec)
	return time.Unix(int64(whole), int64((sec-whole)*1e9)).UTC()
}
