package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	go adaptProcs()
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kcoord:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "kcoord",
		Short: "A Kafka-compatible consumer-group coordinator",
		Long: `kcoord coordinates Kafka consumer groups: clients find their coordinator,
join, sync, heartbeat, commit and fetch offsets through the Kafka protocol.
It stores no records. Run "kcoord serve" for a single node on 127.0.0.1:9092.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.AddCommand(newServeCmd(), newHealthcheckCmd(), newClusterCmd(), newBenchCmd(), newVerifyCmd(), newChaosCmd(), newGroupsCmd(), newTopicsCmd(), newUsersCmd(), newACLsCmd(), newCertsCmd(), &cobra.Command{
		Use:   "version",
		Short: "Print the release, the commit and the data formats this binary reads and writes",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			printVersion(cmd.OutOrStdout())
		},
	})
	return root
}
