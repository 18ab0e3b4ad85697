package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/release"
)

// newFeaturesCmd is `kcoord cluster features`: each node's supported
// feature levels and the finalized ones, and --finalize, which finalizes
// one as kafka-features.sh upgrade does. base and timeout are the cluster
// command's --http-addr and --timeout.
func newFeaturesCmd(base func(*cobra.Command) string, timeout *time.Duration) *cobra.Command {
	var (
		asJSON   bool
		finalize bool
		level    int16
	)
	cmd := &cobra.Command{
		Use:   "features",
		Short: "Each node's release and supported feature levels, the finalized ones; --finalize to finalize",
		Long: `Show what each node supports of the feature ` + release.Feature + ` (a level per release
that changed a persisted or wire format) and the level the cluster
finalized. Nodes write only what the finalized level allows, so an
upgraded node can go back to the previous binary until it is finalized.

By default (kcoord.features.auto.finalize=true) the cluster finalizes the
highest level every node supports by itself, once every node runs the new
release. --finalize does it by hand (as kafka-features.sh upgrade), with
--level N for a level other than the highest; it fails, naming the nodes,
when some node does not support it. A finalized level is never lowered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), *timeout)
			defer cancel()
			url, method := base(cmd)+"/v1/cluster/features", http.MethodGet
			switch {
			case finalize && cmd.Flags().Changed("level") && level < 1:
				return fmt.Errorf("--level %d: want a level of 1 or more (%s is never disabled)", level, release.Feature)
			case finalize:
				url, method = url+"/finalize", http.MethodPost
				if level > 0 {
					url += fmt.Sprintf("?level=%d", level)
				}
			case cmd.Flags().Changed("level"):
				return fmt.Errorf("--level goes with --finalize")
			}
			body, err := adminCall(ctx, method, url)
			if se := (*adminStatusError)(nil); errors.As(err, &se) && se.code == http.StatusNotFound {
				return fmt.Errorf("%w: that node serves no feature levels; it runs kcoord 0.1.0, which has none (every node of it is at %s 1): ask a node of a later release", err, release.Feature)
			}
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var st cluster.FeatureStatus
			if err := json.Unmarshal(body, &st); err != nil {
				return fmt.Errorf("features: %w", err)
			}
			return printFeatures(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the features as JSON, for tools")
	cmd.Flags().BoolVar(&finalize, "finalize", false, "finalize "+release.Feature+" at the highest level every node supports (or --level)")
	cmd.Flags().Int16Var(&level, "level", 0, "with --finalize: the level to finalize")
	return cmd
}

// printFeatures writes a table of the nodes, then the finalized levels.
func printFeatures(w io.Writer, st cluster.FeatureStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NODE\tRELEASE\t%s\n", release.Feature)
	for _, n := range st.Nodes {
		rel, levels := n.Release, "unknown (not heard from)"
		if n.Known {
			r := n.Supported[release.Feature]
			levels = fmt.Sprintf("%d-%d", r.Min, r.Max)
			if rel == "" {
				rel = "0.1.0" // the release that gossips none
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", n.NodeID, dash(rel), levels)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	names := make([]string, 0, len(st.Finalized))
	for name := range st.Finalized {
		names = append(names, name)
	}
	slices.Sort(names)
	fmt.Fprintln(w)
	for _, name := range names {
		fin := st.Finalized[name]
		fmt.Fprintf(w, "finalized: %s %d (kcoord %s)\n", name, fin, release.ReleaseOf(release.Level(fin)))
	}
	switch fin := st.Finalized[release.Feature]; {
	case st.Finalizable > fin && st.AutoFinalize:
		fmt.Fprintf(w, "every node supports %s %d: the cluster finalizes it by itself within seconds\n", release.Feature, st.Finalizable)
	case st.Finalizable > fin:
		fmt.Fprintf(w, "every node supports %s %d: finalize it with \"kcoord cluster features --finalize\" once no node is to go back to kcoord %s\n",
			release.Feature, st.Finalizable, release.ReleaseOf(release.Level(fin)))
	}
	return nil
}
