package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/assignors/assignbench"
)

// newBenchCmd returns "kcoord bench", the benchmarks that compare kcoord
// with other implementations on this machine.
func newBenchCmd() *cobra.Command {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Run benchmarks",
		Args:  cobra.NoArgs,
	}
	bench.AddCommand(newBenchAssignCmd())
	return bench
}

// newBenchAssignCmd returns "kcoord bench assign": kcoord's
// cooperative-sticky assignor against franz-go's on the same groups, the
// whole leader path each (JoinGroup metadata in, SyncGroup assignments out).
func newBenchAssignCmd() *cobra.Command {
	var (
		cases []string
		runs  int
	)
	cmd := &cobra.Command{
		Use:   "assign",
		Short: "Compare kcoord's cooperative-sticky assignor with franz-go's",
		Long: `Balances the same consumer groups with kcoord's cooperative-sticky assignor
and franz-go's and prints, per case: time and allocations per balance, the
plan's spread (most minus fewest partitions per member), moves (partitions
taken from members still in the group), and the rebalances needed to assign
everything. Cases: ` + strings.Join(assignbench.CaseNames, ", ") + `.
The large cases hold a million partitions; each takes some seconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runs < 1 {
				return fmt.Errorf("--runs must be at least 1")
			}
			if len(cases) == 0 {
				cases = assignbench.CaseNames
			}
			var results []assignbench.Result
			for _, name := range cases { // one case in memory at a time
				built, err := assignbench.Cases(name)
				if err != nil {
					return err
				}
				r, err := assignbench.Run(&built[0], assignbench.Contenders(), runs)
				if err != nil {
					return err
				}
				results = append(results, r...)
			}
			return assignbench.WriteTable(cmd.OutOrStdout(), results)
		},
	}
	cmd.Flags().StringSliceVar(&cases, "cases", nil, "cases to run, comma separated (default all)")
	cmd.Flags().IntVar(&runs, "runs", 3, "balances timed per case and assignor")
	return cmd
}
