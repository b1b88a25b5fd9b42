package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row is one line of the final table. LM is lancemaster's figure, Raw the
// raw baseline's from the same run, Ratio = LM / Raw. Whether higher or lower
// is better depends on the figure (throughput: higher; time, bytes: lower);
// the target says which.
type row struct {
	Section string   `json:"section"`
	Figure  string   `json:"figure"`
	Unit    string   `json:"unit"`
	LM      *float64 `json:"lancemaster,omitempty"`
	Raw     *float64 `json:"raw_baseline,omitempty"`
	Ratio   *float64 `json:"ratio,omitempty"`
	Target  string   `json:"target,omitempty"`
	Met     *bool    `json:"target_met,omitempty"`
	Note    string   `json:"note,omitempty"`
}

func f64(v float64) *float64 { return &v }

// withRatio sets Ratio = LM / Raw when both are known and Raw is not zero.
func (r row) withRatio() row {
	if r.LM != nil && r.Raw != nil && *r.Raw != 0 {
		r.Ratio = f64(*r.LM / *r.Raw)
	}
	return r
}

// atLeastRatio: the target is Ratio >= x.
func (r row) atLeastRatio(x float64) row { return r.ratioTarget(">=", x, "raw") }

// ratioTarget: the target is Ratio op x, x times the baseline named base.
func (r row) ratioTarget(op string, x float64, base string) row {
	r.Target = fmt.Sprintf("%s %g x %s", op, x, base)
	if r.Ratio != nil {
		met := *r.Ratio >= x
		if op == "<=" {
			met = *r.Ratio <= x
		}
		r.Met = &met
	}
	return r
}

// atLeast: the target is LM >= x (in the row's unit).
func (r row) atLeast(x float64, unit string) row {
	r.Target = fmt.Sprintf(">= %s %s", sig(x, 3), unit)
	if r.LM != nil {
		met := *r.LM >= x
		r.Met = &met
	}
	return r
}

// atMost: the target is LM <= x (in the row's unit).
func (r row) atMost(x float64, unit string) row {
	r.Target = fmt.Sprintf("<= %g %s", x, unit)
	if r.LM != nil {
		met := *r.LM <= x
		r.Met = &met
	}
	return r
}

// report is everything the run found; -json prints it as is.
type report struct {
	Date     string          `json:"date"`
	Host     hostInfo        `json:"host"`
	Options  map[string]any  `json:"options"`
	Rows     []row           `json:"rows"`
	Raw      []loadResult    `json:"raw_apply,omitempty"`
	Admit    []loadResult    `json:"admission,omitempty"`
	RawSnap  *snapResult     `json:"raw_snapshot,omitempty"`
	RawLife  *rawLifeResult  `json:"raw_lifecycle,omitempty"`
	Dispatch *dispatchResult `json:"dispatch,omitempty"`
	Reports  *reportsResult  `json:"reports,omitempty"`
	Latency  *latencyResult  `json:"latency,omitempty"`
	Failover *failoverResult `json:"failover,omitempty"`
	// Sustained is the whole lifecycle at steady state.
	Sustained *sustainedResult `json:"sustained,omitempty"`
	// Console is the console's jobs page in headless chromium.
	Console *consoleResult `json:"console,omitempty"`
	FSM     []benchLine    `json:"fsm_benchmarks,omitempty"`
	Backend *backendResult `json:"backend,omitempty"`
	// Rounds holds what each round of the peer comparisons measured
	// (-rounds; one round without it).
	Rounds   []*peerRound       `json:"rounds,omitempty"`
	Errors   []string           `json:"errors,omitempty"`
	Sections map[string]float64 `json:"section_seconds"`

	cur      *peerRound // the round running
	roundTag string     // " (round k)" on the rows of round k when -rounds > 1
}

type hostInfo struct {
	GoVersion string `json:"go"`
	CPUs      int    `json:"cpus"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// add appends rows; with -rounds > 1 each figure says its round.
func (r *report) add(rows ...row) {
	for _, x := range rows {
		x.Figure += r.roundTag
		r.Rows = append(r.Rows, x)
	}
}

func (r *report) fail(section string, err error) {
	msg := section + ": " + err.Error()
	r.Errors = append(r.Errors, msg)
	first, _, _ := strings.Cut(err.Error(), "\n")
	r.add(row{Section: section, Figure: "(failed)", Note: clip(first, 160) + " (see below)"})
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints section | figure | lancemaster | raw baseline | ratio | target.
func (r *report) writeTable(w io.Writer) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "section\tfigure\tlancemaster\traw baseline\tratio\ttarget")
	fmt.Fprintln(tw, "-------\t------\t-----------\t------------\t-----\t------")
	for _, x := range r.Rows {
		target := x.Target
		if x.Met != nil {
			if *x.Met {
				target += " (met)"
			} else {
				target += " (MISSED)"
			}
		}
		if x.Note != "" {
			if target != "" {
				target += "; "
			}
			target += x.Note
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.Section, figureWithUnit(x),
			num(x.LM), num(x.Raw), ratio(x.Ratio), target)
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	if len(r.Errors) > 0 {
		fmt.Fprintln(w)
		for _, e := range r.Errors {
			fmt.Fprintln(w, "error:", e)
		}
	}
}

func figureWithUnit(x row) string {
	if x.Unit == "" {
		return x.Figure
	}
	return x.Figure + " [" + x.Unit + "]"
}

// num prints a figure with three significant digits and no exponent,
// thousands grouped: 12,358 / 19.2 / 0.00218.
func num(v *float64) string {
	if v == nil {
		return "-"
	}
	return sig(*v, 3)
}

// ratio prints a ratio with two significant digits: 0.24x, 3.8x, 0.000021x.
func ratio(v *float64) string {
	if v == nil {
		return "-"
	}
	return sig(*v, 2) + "x"
}

// sig formats v with n significant digits (whole numbers keep every digit).
func sig(v float64, n int) string {
	a := math.Abs(v)
	if a == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	decimals := n - 1 - int(math.Floor(math.Log10(a)))
	if decimals <= 0 {
		return groupThousands(strconv.FormatFloat(v, 'f', 0, 64))
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
