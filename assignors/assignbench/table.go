package assignbench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable prints results as a table, each case's first contender (kcoord)
// compared with the others: how many times faster it is.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tassignor\ttime/op\tallocs/op\tMB/op\tspread\tmoves\trounds\tspeedup\t")
	var base Result
	for i, r := range results {
		speedup := ""
		if i == 0 || r.Case != results[i-1].Case {
			base = r
		} else if base.NsPerOp > 0 {
			speedup = fmt.Sprintf("%.1fx", float64(r.NsPerOp)/float64(base.NsPerOp))
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%.1f\t%d\t%d\t%d\t%s\t\n", r.Case, r.Contender,
			time.Duration(r.NsPerOp).Round(10*time.Microsecond), r.AllocsPerOp, float64(r.BytesPerOp)/(1<<20),
			r.Spread, r.Moves, r.Rounds, speedup)
	}
	return tw.Flush()
}
