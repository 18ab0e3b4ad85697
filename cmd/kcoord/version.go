package main

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/api"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/release"
)

// printVersion writes `kcoord version`: the release and commit, the
// feature levels this binary supports, and every format it reads and
// writes (docs/compatibility.md).
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "kcoord %s (commit %s, %s %s/%s)\n", release.Version, release.Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "feature %s: supports %d-%d", release.Feature, release.MinLevel, release.MaxLevel)
	for l := release.MinLevel; l <= release.MaxLevel; l++ {
		sep := ", "
		if l == release.MinLevel {
			sep = " ("
		}
		fmt.Fprintf(w, "%s%d = kcoord %s", sep, l, release.ReleaseOf(l))
	}
	fmt.Fprintln(w, ")")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FORMAT\tREADS\tWRITES")
	for _, f := range cluster.Formats() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, f.Reads, f.Writes)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Kafka APIs (ApiVersions; SASL's when SASL is on):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range api.Versions() {
		fmt.Fprintf(tw, "  %s\t%d\t%d-%d\n", kmsg.NameForKey(k.ApiKey), k.ApiKey, k.MinVersion, k.MaxVersion)
	}
	_ = tw.Flush()
}
