// Command ratios turns `go test -bench` output into one table: every
// benchmark beside its baseline, as a ratio. bench/run.sh feeds it.
//
// A benchmark states its baseline in one of three ways, and ratios finds
// each of them:
//   - a metric whose unit is "ratio" or "<cco>/<baseline>" with plain names
//     (b.ReportMetric(t/base, "egress/relay")): printed as is;
//   - a pair of metrics "<name>-<unit>" and "baseline-<unit>": name/baseline;
//   - sibling sub-benchmarks where one is named "baseline" ("baseline-<how>",
//     "<how>-baseline") or "direct", or "X" beside "X-<how>": every shared
//     metric, X/baseline.
//
// A benchmark with none of these is still listed, marked "no baseline", so
// one added without a baseline shows up instead of vanishing.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is one benchmark line's metrics, by unit.
type Result struct {
	Pkg, Name string
	Metrics   map[string]float64
	order     []string
}

// Row is one line of the table.
type Row struct {
	Pkg, Bench, Measure string
	Value, Base, Ratio  float64 // Value and Base are NaN-free only when HaveBase
	HaveBase            bool
	Note                string
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// Parse reads go test -bench output.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue // a benchmark's log line, not a result
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		res := Result{Pkg: pkg, Name: procSuffix.ReplaceAllString(f[0], ""), Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: metric %q is not a number", line, f[i])
			}
			res.Metrics[f[i+1]] = v
			res.order = append(res.order, f[i+1])
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

var standard = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}
var plainRatio = regexp.MustCompile(`^[A-Za-z0-9_.+]+/[A-Za-z0-9_.+]+$`)

// isRatio tells a reported ratio from a per-op or per-second unit.
func isRatio(unit string) bool {
	if unit == "ratio" || strings.HasSuffix(unit, "-ratio") {
		return true
	}
	if standard[unit] || !plainRatio.MatchString(unit) {
		return false
	}
	_, den, _ := strings.Cut(unit, "/")
	return den != "op" && den != "s" && den != "launch"
}

// Rows pairs every result with its baseline.
func Rows(results []Result) []Row {
	var rows []Row
	covered := map[string]bool{}
	key := func(r Result) string { return r.Pkg + " " + r.Name }
	for _, r := range results {
		// Ratios the benchmark computed itself.
		for _, u := range r.order {
			if isRatio(u) {
				rows = append(rows, Row{Pkg: r.Pkg, Bench: r.Name, Measure: u, Ratio: r.Metrics[u], Note: "reported"})
				covered[key(r)] = true
			}
		}
		// "<name>-<unit>" against "baseline-<unit>".
		for _, u := range r.order {
			suffix, ok := strings.CutPrefix(u, "baseline-")
			if !ok {
				continue
			}
			for _, v := range r.order {
				name, rest, found := strings.Cut(v, "-")
				if !found || rest != suffix || name == "baseline" || name == "overhead" {
					continue
				}
				rows = append(rows, ratioRow(r.Pkg, r.Name, v, r.Metrics[v], r.Metrics[u]))
				covered[key(r)] = true
			}
		}
	}
	// Sibling sub-benchmarks.
	byParent := map[string][]Result{}
	var parents []string
	for _, r := range results {
		i := strings.LastIndex(r.Name, "/")
		if i < 0 {
			continue
		}
		p := r.Pkg + " " + r.Name[:i]
		if _, ok := byParent[p]; !ok {
			parents = append(parents, p)
		}
		byParent[p] = append(byParent[p], r)
	}
	for _, p := range parents {
		sibs := byParent[p]
		for _, x := range sibs {
			base, ok := baselineOf(x, sibs)
			if !ok {
				continue
			}
			for _, u := range x.order {
				if bv, ok := base.Metrics[u]; ok && !isRatio(u) {
					rows = append(rows, ratioRow(x.Pkg, x.Name+" vs "+leaf(base.Name), u, x.Metrics[u], bv))
				}
			}
			covered[key(x)], covered[key(base)] = true, true
		}
	}
	for _, r := range results {
		if !covered[key(r)] {
			rows = append(rows, Row{Pkg: r.Pkg, Bench: r.Name, Measure: "ns/op", Value: r.Metrics["ns/op"], Note: "no baseline"})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Pkg != rows[j].Pkg {
			return rows[i].Pkg < rows[j].Pkg
		}
		return rows[i].Bench < rows[j].Bench
	})
	return rows
}

func leaf(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// baselineOf finds x's baseline among its siblings: one whose name says
// baseline, else "direct" (the path without cco in it), else "x-<how>".
func baselineOf(x Result, sibs []Result) (Result, bool) {
	xl := leaf(x.Name)
	if isBaselineName(xl) {
		return Result{}, false
	}
	for _, s := range sibs {
		if isBaselineName(leaf(s.Name)) {
			return s, true
		}
	}
	for _, s := range sibs {
		if l := leaf(s.Name); strings.HasPrefix(l, xl+"-") {
			return s, true
		}
	}
	return Result{}, false
}

func isBaselineName(l string) bool {
	return l == "direct" || strings.HasPrefix(l, "baseline") || strings.HasSuffix(l, "-baseline")
}

func ratioRow(pkg, bench, unit string, v, base float64) Row {
	r := Row{Pkg: pkg, Bench: bench, Measure: unit, Value: v, Base: base, HaveBase: true}
	if base != 0 {
		r.Ratio = v / base
	} else {
		r.Note = "baseline is 0"
	}
	return r
}

// Write prints the table.
func Write(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tmeasure\tcco\tbaseline\tratio\tnote")
	for _, r := range rows {
		val, base, ratio := "", "", ""
		if r.HaveBase || r.Note == "no baseline" {
			val = strconv.FormatFloat(r.Value, 'g', 4, 64)
		}
		if r.HaveBase {
			base = strconv.FormatFloat(r.Base, 'g', 4, 64)
		}
		if r.Note != "no baseline" && r.Note != "baseline is 0" {
			ratio = strconv.FormatFloat(r.Ratio, 'f', 3, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strings.TrimPrefix(r.Pkg, "github.com/cco-dev/cco/"), r.Bench, r.Measure, val, base, ratio, r.Note)
	}
	return tw.Flush()
}

func main() {
	results, err := Parse(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ratios: %v\n", err)
		os.Exit(1)
	}
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "ratios: no benchmark results on stdin (pipe go test -bench output in)")
		os.Exit(1)
	}
	if err := Write(os.Stdout, Rows(results)); err != nil {
		fmt.Fprintf(os.Stderr, "ratios: %v\n", err)
		os.Exit(1)
	}
}
