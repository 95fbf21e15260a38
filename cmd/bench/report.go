package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
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
}

// Result is one scenario's medians over the rounds.
type Result struct {
	Scenario  string  `json:"scenario"`
	About     string  `json:"about"`
	ReqPerSec float64 `json:"req_per_s"`
	// RatioToNaive is the median over rounds of this scenario's req/s over
	// naive's in the same round (0 when naive did not run).
	RatioToNaive float64 `json:"ratio_to_naive"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	Requests     int     `json:"requests"`
	Non2xx       int     `json:"non_2xx"`
	AllowNon2xx  bool    `json:"non_2xx_allowed"`
	// CommitsPerRequest is from pg_stat_database: every transaction,
	// a read-only statement outside one included; -1 on SQLite.
	CommitsPerRequest float64 `json:"commits_per_request"`
	// WALCommitsPerRequest counts the commit records in the WAL: the
	// transactions that wrote. -1 on SQLite or without pg_walinspect.
	WALCommitsPerRequest float64 `json:"wal_commits_per_request"`
	// CPUPerRequestUs is CPU microseconds per request of config.cpu_scope.
	CPUPerRequestUs float64 `json:"cpu_us_per_request"`
	// PGCPUPerRequestUs is the CPU microseconds per request of every
	// PostgreSQL process on this machine; -1 on SQLite or a remote server.
	PGCPUPerRequestUs float64    `json:"pg_cpu_us_per_request"`
	HotKey            *hotCounts `json:"hot_key,omitempty"`
	Rounds            []Round    `json:"rounds"`
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
	PGCPUSeconds float64     `json:"pg_cpu_s"`
}

func printTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "%s, %d CPUs (%s), %s, %s; c=%d, %s × %d rounds (medians), pool %d, CPU of the %s\n\n",
		rep.Machine.CPUModel, rep.Machine.CPUs, rep.Machine.GOARCH, rep.Machine.Go, rep.Machine.Database,
		rep.Config.Clients, rep.Config.Duration, rep.Config.Rounds, rep.Config.Pool, rep.Config.CPUScope)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treq/s\t× naive\tp50 ms\tp99 ms\tnon-2xx\tcommits/req\twrites/req\tCPU µs/req\tPG CPU µs/req\t")
	for _, r := range rep.Results {
		ratio, commits, writes, cpu, pgCPU := "-", "-", "-", "-", "-"
		if r.RatioToNaive > 0 {
			ratio = fmt.Sprintf("%.2f", r.RatioToNaive)
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
		if r.PGCPUPerRequestUs >= 0 {
			pgCPU = fmt.Sprintf("%.0f", r.PGCPUPerRequestUs)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.2f\t%.2f\t%d\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.ReqPerSec, ratio, r.P50Ms, r.P99Ms, r.Non2xx, commits, writes, cpu, pgCPU)
	}
	_ = tw.Flush()
	for _, r := range rep.Results {
		if h := r.HotKey; h != nil {
			fmt.Fprintf(w, "\nhot-key: %d keys, %d first effects, %d replays, %d × 409 request_in_progress, %d other answers (target 0)\n",
				h.Keys, h.Effects, h.Replays, h.InProgress, h.Bad)
		}
	}
}

// drawChart draws throughput bars and latency percentiles of rep's results
// to path, as SVG or (for .png) PNG.
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
	top := plot.New()
	top.Title.Text = fmt.Sprintf("Throughput, req/s (%s, c=%d, median of %d × %s)", rep.Machine.Database, rep.Config.Clients, rep.Config.Rounds, rep.Config.Duration)
	top.X.Min = 0
	top.NominalY(names...)
	bars, err := plotter.NewBarChart(rps, vg.Points(barWidth*2))
	if err != nil {
		return err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}
	bars.LineStyle.Width = 0
	top.Add(bars, plotter.NewGrid())

	bottom := plot.New()
	bottom.Title.Text = "Latency, ms"
	bottom.X.Min = 0
	bottom.NominalY(names...)
	b50, err := plotter.NewBarChart(p50, vg.Points(barWidth))
	if err != nil {
		return err
	}
	b99, err := plotter.NewBarChart(p99, vg.Points(barWidth))
	if err != nil {
		return err
	}
	for i, b := range []*plotter.BarChart{b50, b99} {
		b.Horizontal = true
		b.LineStyle.Width = 0
		b.Offset = vg.Points(barWidth * (float64(i) - 0.5))
	}
	b50.Color = color.RGBA{R: 0x66, G: 0xaa, B: 0x44, A: 0xff}
	b99.Color = color.RGBA{R: 0xdd, G: 0x77, B: 0x22, A: 0xff}
	bottom.Add(b50, b99, plotter.NewGrid())
	bottom.Legend.Add("p50", b50)
	bottom.Legend.Add("p99", b99)
	bottom.Legend.Top = true
	bottom.Legend.Left = false
	top.X.Max = 1.1 * slices.Max(rps)
	bottom.X.Max = 1.25 * slices.Max(p99)

	w, h := 9*vg.Inch, vg.Length(1.6+0.55*float64(len(rs)))*vg.Inch
	var canvas vg.CanvasWriterTo
	if strings.EqualFold(filepath.Ext(path), ".png") {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	} else {
		canvas = vgsvg.New(w, h)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(10), PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
