package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Report is the JSON output of one bench invocation.
type Report struct {
	Started time.Time    `json:"started"`
	Machine Machine      `json:"machine"`
	Config  reportConfig `json:"config"`
	Results []Result     `json:"results,omitempty"`
	Scale   *ScaleReport `json:"scale,omitempty"`
	Soak    *SoakReport  `json:"soak,omitempty"`
}

// Machine is where the bench ran.
type Machine struct {
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	Go       string `json:"go"`
	Database string `json:"database"`
}

type reportConfig struct {
	Dialect    string `json:"dialect"`
	Clients    int    `json:"clients"`
	Duration   string `json:"duration_per_scenario"`
	Rounds     int    `json:"rounds"`
	Pool       int    `json:"pool"`
	ServerProc bool   `json:"server_proc"`
	CPUScope   string `json:"cpu_scope"`
	Prefill    int    `json:"prefill"`
	// Off names the store's speed tricks the server ran without (-off).
	Off string `json:"off,omitempty"`
}

// Result is one scenario's medians over the rounds.
type Result struct {
	Scenario  string  `json:"scenario"`
	About     string  `json:"about"`
	ReqPerSec float64 `json:"req_per_s"`
	// Ratios compare this scenario's req/s with each of its baselines
	// that ran (naive first), both ways.
	Ratios      []Ratio `json:"ratios,omitempty"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Requests    int     `json:"requests"`
	Non2xx      int     `json:"non_2xx"`
	AllowNon2xx bool    `json:"non_2xx_allowed"`
	// CommitsPerRequest is from pg_stat_database on PostgreSQL (every
	// transaction, a read-only statement outside one included) and
	// Com_commit on MariaDB (every COMMIT, a statement in autocommit not
	// included); -1 on SQLite.
	CommitsPerRequest float64 `json:"commits_per_request"`
	// WALCommitsPerRequest counts the transactions that wrote: the commit
	// records in the WAL on PostgreSQL, InnoDB's trx_commits_insert_update
	// on MariaDB. -1 on SQLite, without pg_walinspect, or without the
	// right to turn the InnoDB counter on.
	WALCommitsPerRequest float64 `json:"wal_commits_per_request"`
	// CPUPerRequestUs is CPU microseconds per request of config.cpu_scope.
	CPUPerRequestUs float64 `json:"cpu_us_per_request"`
	// DBCPUPerRequestUs is the CPU microseconds per request of the
	// database server's processes on this machine (every PostgreSQL
	// process, or mariadbd); -1 on SQLite or a remote server.
	DBCPUPerRequestUs float64    `json:"db_cpu_us_per_request"`
	HotKey            *hotCounts `json:"hot_key,omitempty"`
	Rounds            []Round    `json:"rounds"`
}

// Ratio is a scenario's throughput over a baseline's, computed two ways
// that differ when the machine's speed moves between rounds.
type Ratio struct {
	Baseline string `json:"baseline"`
	// MedianOfRounds is the median over rounds of the scenario's req/s
	// over the baseline's in the same round: it cancels a slow round that
	// slowed both.
	MedianOfRounds float64 `json:"median_of_rounds"`
	// OfMedians is the scenario's median req/s over the baseline's: the
	// ratio of the two req/s columns of the table.
	OfMedians float64 `json:"of_medians"`
}

// ratio compares rps with base, round by round (both have one value per
// round).
func ratio(baseline string, rps, base []float64) Ratio {
	perRound := make([]float64, len(rps))
	for i := range rps {
		perRound[i] = rps[i] / base[i]
	}
	return Ratio{Baseline: baseline, MedianOfRounds: median(perRound), OfMedians: median(rps) / median(base)}
}

// against returns r's ratio to baseline, if that baseline ran.
func (r *Result) against(baseline string) (Ratio, bool) {
	for _, x := range r.Ratios {
		if x.Baseline == baseline {
			return x, true
		}
	}
	return Ratio{}, false
}

// Round is one scenario run.
type Round struct {
	ReqPerSec    float64     `json:"req_per_s"`
	P50Ms        float64     `json:"p50_ms"`
	P99Ms        float64     `json:"p99_ms"`
	Requests     int         `json:"requests"`
	Non2xx       int         `json:"non_2xx"`
	Statuses     map[int]int `json:"statuses"`
	Commits      int64       `json:"commits"`
	WALCommits   int64       `json:"wal_commits"`
	CPUSeconds   float64     `json:"cpu_s"`
	DBCPUSeconds float64     `json:"db_cpu_s"`
}

func printTable(w io.Writer, rep *Report) {
	off := ""
	if rep.Config.Off != "" {
		off = ", without " + rep.Config.Off
	}
	fmt.Fprintf(w, "%s, %d CPUs (%s), %s, %s; c=%d, %s × %d rounds (medians), pool %d%s, CPU of the %s\n\n",
		rep.Machine.CPUModel, rep.Machine.CPUs, rep.Machine.GOARCH, rep.Machine.Go, rep.Machine.Database,
		rep.Config.Clients, rep.Config.Duration, rep.Config.Rounds, rep.Config.Pool, off, rep.Config.CPUScope)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treq/s\t× naive, rounds\t× naive, medians\tp50 ms\tp99 ms\tnon-2xx\tcommits/req\twrites/req\tCPU µs/req\tDB CPU µs/req\t")
	for _, r := range rep.Results {
		rounds, medians, commits, writes, cpu, dbCPU := "-", "-", "-", "-", "-", "-"
		if x, ok := r.against("naive"); ok {
			rounds, medians = fmt.Sprintf("%.2f", x.MedianOfRounds), fmt.Sprintf("%.2f", x.OfMedians)
		}
		if r.CommitsPerRequest >= 0 {
			commits = fmt.Sprintf("%.2f", r.CommitsPerRequest)
		}
		if r.WALCommitsPerRequest >= 0 {
			writes = fmt.Sprintf("%.2f", r.WALCommitsPerRequest)
		}
		if r.CPUPerRequestUs >= 0 {
			cpu = fmt.Sprintf("%.0f", r.CPUPerRequestUs)
		}
		if r.DBCPUPerRequestUs >= 0 {
			dbCPU = fmt.Sprintf("%.0f", r.DBCPUPerRequestUs)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%.2f\t%.2f\t%d\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.ReqPerSec, rounds, medians, r.P50Ms, r.P99Ms, r.Non2xx, commits, writes, cpu, dbCPU)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\n× naive, rounds: the median over the rounds of req/s ÷ naive's req/s in the same round.")
	fmt.Fprintln(w, "× naive, medians: the ratio of the medians, req/s ÷ naive's req/s as printed above.")
	likeForLike := false
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rep.Results {
		for _, x := range r.Ratios {
			if x.Baseline == "naive" {
				continue
			}
			if !likeForLike {
				fmt.Fprintln(w, "\nAgainst the like-for-like baselines (the same two ratios):")
				fmt.Fprintln(tw, "scenario\tbaseline\t×, rounds\t×, medians\t")
				likeForLike = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t\n", r.Scenario, x.Baseline, x.MedianOfRounds, x.OfMedians)
		}
	}
	_ = tw.Flush()
	if likeForLike && rep.Config.Dialect != "postgres" {
		fmt.Fprintf(w, "floor is one pgx batch, PostgreSQL only by nature: not run on %s.\n", rep.Machine.Database)
	}
	for _, r := range rep.Results {
		if h := r.HotKey; h != nil {
			fmt.Fprintf(w, "\nhot-key: %d keys, %d first effects, %d replays, %d × 409 request_in_progress, %d other answers (target 0)\n",
				h.Keys, h.Effects, h.Replays, h.InProgress, h.Bad)
		}
	}
}

// chartFont is the chart's typeface: Liberation Sans has the metrics of
// Arial and Helvetica, and the SVG names it with those and the generic
// sans-serif family after it (fontFamilies), so that a viewer without
// Liberation draws the labels in a sans-serif of about the same width.
func chartFont(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

const fontFamilies = "Liberation Sans,Arimo,Arial,Helvetica,sans-serif"

// drawChart draws throughput bars and latency percentiles of rep's results
// to path, as SVG or (for .png) PNG: throughput on a linear axis, latency
// on a log one (a hot row's p99 is tens of times a replay's), each bar
// with its value written beside it and the legend right of the bars.
func drawChart(path string, rep *Report) error {
	rs := slices.Clone(rep.Results)
	slices.Reverse(rs) // the first scenario at the top
	names := make([]string, len(rs))
	rps, p50, p99 := make(plotter.Values, len(rs)), make(plotter.Values, len(rs)), make(plotter.Values, len(rs))
	for i, r := range rs {
		names[i] = r.Scenario
		rps[i], p50[i], p99[i] = r.ReqPerSec, r.P50Ms, r.P99Ms
	}
	const barWidth = 9
	top := newChartPlot(fmt.Sprintf("Throughput, req/s (%s, c=%d, median of %d × %s)", rep.Machine.Database, rep.Config.Clients, rep.Config.Rounds, rep.Config.Duration), names)
	bars, err := newBars(rps, 0, vg.Points(barWidth*2), 0, color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff})
	if err != nil {
		return err
	}
	top.Add(plotter.NewGrid())
	top.Add(bars...)
	top.X.Min, top.X.Max = 0, 1.15*slices.Max(rps)

	bottom := newChartPlot("Latency, ms (log scale)", names)
	// The bars start at lo: a log axis has no 0.
	lo := math.Pow(10, math.Floor(math.Log10(slices.Min(p50)/2)))
	bottom.X.Scale, bottom.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	bottom.Add(plotter.NewGrid())
	// The legend goes right of the plot, its text left-aligned so that a
	// wider font grows away from the icons.
	legend := plot.NewLegend()
	legend.TextStyle.Font = chartFont(vg.Points(10))
	legend.Top, legend.Left = true, true
	legend.Padding = vg.Points(3)
	const legendWidth = 50
	for i, s := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{
		{"p50", p50, color.RGBA{R: 0x66, G: 0xaa, B: 0x44, A: 0xff}},
		{"p99", p99, color.RGBA{R: 0xdd, G: 0x77, B: 0x22, A: 0xff}},
	} {
		ps, err := newBars(s.v, lo, vg.Points(barWidth), vg.Points(barWidth*(0.5-float64(i))), s.c)
		if err != nil {
			return err
		}
		bottom.Add(ps...)
		legend.Add(s.name, ps[0].(plot.Thumbnailer))
	}
	// After Add, which widens the axis to the bars' 0.
	bottom.X.Min, bottom.X.Max = lo, 3*slices.Max(p99)

	w, h := 9*vg.Inch, vg.Length(1.6+0.55*float64(len(rs)))*vg.Inch
	var canvas vg.CanvasWriterTo
	if strings.EqualFold(filepath.Ext(path), ".png") {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	} else {
		canvas = vgsvg.New(w, h)
	}
	dc := draw.New(canvas)
	// The right pad holds the legend.
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(10), PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(legendWidth + 12)}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	tile := canvases[1][0].Rectangle
	legend.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: tile.Max.X + vg.Points(8), Y: tile.Min.Y},
		Max: vg.Point{X: tile.Max.X + vg.Points(legendWidth), Y: tile.Max.Y - vg.Points(20)},
	}})
	var out bytes.Buffer
	if _, err := canvas.WriteTo(&out); err != nil {
		return err
	}
	b := out.Bytes()
	if _, ok := canvas.(*vgsvg.Canvas); ok {
		b = bytes.ReplaceAll(b, []byte("font-family:Liberation Sans;"), []byte("font-family:"+fontFamilies+";"))
	}
	return os.WriteFile(path, b, 0o644)
}

// newChartPlot is a plot of horizontal bars, one row per name, in
// chartFont.
func newChartPlot(title string, names []string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.NominalY(names...)
	for _, st := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label} {
		st.Font = chartFont(st.Font.Size)
	}
	// Room between the scenario names and the bars: the SVG places each
	// name by Liberation Sans' widths, and a viewer's wider sans-serif
	// grows it to the right, into that room, not into the bars.
	p.Y.Padding = vg.Points(18)
	return p
}

// newBars draws v as horizontal bars from base, offset vertically by
// offset, each with its value written right of its end. The bars stand on
// a bar chart of height base that is not drawn (a log axis cannot start
// at 0).
func newBars(v plotter.Values, base float64, width, offset vg.Length, c color.Color) ([]plot.Plotter, error) {
	under := make(plotter.Values, len(v))
	over := make(plotter.Values, len(v))
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(v)), Labels: make([]string, len(v))}
	for i, x := range v {
		under[i], over[i] = base, max(x-base, 0)
		labels.XYs[i] = plotter.XY{X: x, Y: float64(i)}
		labels.Labels[i] = formatValue(x)
	}
	stand, err := plotter.NewBarChart(under, width)
	if err != nil {
		return nil, err
	}
	bars, err := plotter.NewBarChart(over, width)
	if err != nil {
		return nil, err
	}
	for _, b := range []*plotter.BarChart{stand, bars} {
		b.Horizontal = true
		b.LineStyle.Width = 0
		b.Offset = offset
	}
	bars.Color = c
	bars.StackOn(stand)
	values, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range values.TextStyle {
		values.TextStyle[i].Font = chartFont(vg.Points(8))
		values.TextStyle[i].YAlign = draw.YCenter
	}
	values.Offset = vg.Point{X: vg.Points(3), Y: offset}
	return []plot.Plotter{bars, values}, nil
}

// formatValue writes a figure with three significant digits at most,
// and no decimals above 100 (req/s, a slow p99).
func formatValue(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}
