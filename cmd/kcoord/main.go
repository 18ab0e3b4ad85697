// Command kcoord is a Kafka-compatible consumer-group coordinator.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = ""

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
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "kcoord", versionString(), runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
		},
	})
	return root
}

func versionString() string {
	if version != "" {
		return version
	}
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}
