package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// resetOpts are "kcoord groups reset-offsets"'s flags.
type resetOpts struct {
	group     string
	topics    []string
	allTopics bool

	toOffset, shiftBy       int64
	toEarliest, toLatest    bool
	toCurrent               bool
	toDatetime, byDuration  string
	fromFile                string
	dryRun, execute, export bool
	dataPlane               string
	set                     map[string]bool // the scenario flags given
}

// resetScenarios are reset-offsets' ways to pick the new offsets; exactly
// one is given.
var resetScenarios = []string{"to-offset", "to-earliest", "to-latest", "to-current", "shift-by", "to-datetime", "by-duration", "from-file"}

// noExecuteWarning is what kafka-consumer-groups.sh prints when neither
// --dry-run nor --execute is given.
const noExecuteWarning = "WARN: No action will be performed as the --execute option is missing. " +
	"In a future major release, the default behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. " +
	"You should add the --dry-run option explicitly if you are scripting this command and want to keep the current default behavior without prompting."

// resetCmd is "kcoord groups reset-offsets".
func (g *adminCLI) resetCmd() *cobra.Command {
	o := &resetOpts{}
	cmd := &cobra.Command{
		Use:   "reset-offsets --group G (--topic T[:P,...]|--all-topics) SCENARIO (--dry-run|--execute|--export)",
		Short: "Reset a group's committed offsets",
		Long: `Resets the committed offsets of an inactive group (no members), as
kafka-consumer-groups.sh --reset-offsets does. The partitions: each --topic
(all its partitions, or T:0,2), or --all-topics (every topic the group has
offsets for). The new offsets, one scenario:
  --to-offset N     N
  --to-earliest     the partition's first offset
  --to-latest       the partition's end offset
  --to-current      the committed offset
  --shift-by N      the committed offset plus N (N may be negative)
  --to-datetime T   the first offset at or after T (2006-01-02T15:04:05.000, zone optional)
  --by-duration D   the first offset at or after now minus D (PnDTnHnMnS)
  --from-file F     the CSV lines topic,partition,offset of F (as --export writes)
kcoord stores no records, so --to-earliest, --to-latest, --to-datetime and
--by-duration ask --data-plane, the brokers that hold the topics; with it,
--to-offset and --shift-by are kept within the partition's offsets too.
--dry-run (the default) prints the new offsets, --execute commits them,
--export prints them as CSV for --from-file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.set = map[string]bool{}
			for _, name := range resetScenarios {
				if cmd.Flags().Changed(name) {
					o.set[name] = true
				}
			}
			if v := os.Getenv("KCOORD_DATA_PLANE"); v != "" && !cmd.Flags().Changed("data-plane") {
				o.dataPlane = v
			}
			if err := o.validate(); err != nil {
				return err
			}
			if !o.dryRun && !o.execute && !o.export {
				fmt.Fprintln(cmd.ErrOrStderr(), noExecuteWarning)
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			return o.run(ctx, adm, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.group, "group", "", "the group")
	f.StringArrayVar(&o.topics, "topic", nil, "a topic, or topic:partition,partition (repeatable)")
	f.BoolVar(&o.allTopics, "all-topics", false, "every topic the group has committed offsets for")
	f.Int64Var(&o.toOffset, "to-offset", 0, "reset to this offset")
	f.BoolVar(&o.toEarliest, "to-earliest", false, "reset to the first offset (needs --data-plane)")
	f.BoolVar(&o.toLatest, "to-latest", false, "reset to the end offset (needs --data-plane)")
	f.BoolVar(&o.toCurrent, "to-current", false, "reset to the committed offset")
	f.Int64Var(&o.shiftBy, "shift-by", 0, "shift the committed offset by this much")
	f.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first offset at or after this time (needs --data-plane)")
	f.StringVar(&o.byDuration, "by-duration", "", "reset to the first offset at or after now minus this ISO-8601 duration (needs --data-plane)")
	f.StringVar(&o.fromFile, "from-file", "", "reset to the offsets of this CSV file")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the new offsets only (the default)")
	f.BoolVar(&o.execute, "execute", false, "commit the new offsets")
	f.BoolVar(&o.export, "export", false, "print the new offsets as CSV (topic,partition,offset)")
	f.StringVar(&o.dataPlane, "data-plane", "", "the data plane's brokers, host:port,... [$KCOORD_DATA_PLANE]")
	return cmd
}

func (o *resetOpts) validate() error {
	switch {
	case o.group == "":
		return errors.New("--group: name the group")
	case len(o.set) != 1:
		return fmt.Errorf("give exactly one of --%s", strings.Join(resetScenarios, ", --"))
	case o.dryRun && o.execute:
		return errors.New("give --dry-run or --execute, not both")
	case o.fromFile == "" && len(o.topics) == 0 && !o.allTopics:
		return errors.New("--topic or --all-topics: name the partitions to reset")
	case len(o.topics) > 0 && o.allTopics:
		return errors.New("give --topic or --all-topics, not both")
	case o.set["to-offset"] && o.toOffset < 0:
		return fmt.Errorf("--to-offset %d: an offset is not negative", o.toOffset)
	}
	if o.dataPlane == "" {
		for _, s := range []string{"to-earliest", "to-latest", "to-datetime", "by-duration"} {
			if o.set[s] {
				return fmt.Errorf("--%s needs --data-plane: kcoord stores no records, the data plane's brokers know the partitions' offsets", s)
			}
		}
	}
	return nil
}

func (o *resetOpts) run(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	described, err := adm.DescribeGroups(ctx, o.group)
	if err != nil {
		return fmt.Errorf("describing group %q: %w", o.group, err)
	}
	d := described[o.group]
	switch {
	case errors.Is(d.Err, kerr.GroupIDNotFound):
	case d.Err != nil:
		return fmt.Errorf("describing group %q: %w", o.group, d.Err)
	case d.State != "Empty" && d.State != "Dead":
		fmt.Fprintf(w, "\nError: Assignments can only be reset if the group '%s' is inactive, but the current state is %s.\n", o.group, d.State)
		return fmt.Errorf("group %q has members (%s)", o.group, d.State)
	}
	committed, err := adm.FetchOffsets(ctx, o.group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetching the offsets of group %q: %w", o.group, err)
	}
	targets, err := o.partitions(ctx, adm, committed)
	if err != nil {
		return err
	}
	if err := o.newOffsets(ctx, targets, committed); err != nil {
		return err
	}
	if err := checkPartitionsExist(ctx, adm, targets); err != nil {
		return err
	}
	if o.execute {
		offsets := make(kadm.Offsets)
		for t, ps := range targets {
			for p, at := range ps {
				offsets.Add(kadm.Offset{Topic: t, Partition: p, At: at, LeaderEpoch: -1})
			}
		}
		resps, err := adm.CommitOffsets(ctx, o.group, offsets)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return fmt.Errorf("committing the new offsets of group %q: %w", o.group, err)
		}
	}
	if o.export {
		return writeResetCSV(w, targets)
	}
	printReset(w, o.group, targets)
	return nil
}

// partitions returns the partitions to reset, each with the committed
// offset (or -1) as a start.
func (o *resetOpts) partitions(ctx context.Context, adm *kadm.Client, committed kadm.OffsetResponses) (map[string]map[int32]int64, error) {
	targets := map[string]map[int32]int64{}
	add := func(t string, p int32) {
		if targets[t] == nil {
			targets[t] = map[int32]int64{}
		}
		at := int64(-1)
		if c, ok := committed.Lookup(t, p); ok && c.Err == nil {
			at = c.At
		}
		targets[t][p] = at
	}
	switch {
	case o.fromFile != "":
		return targets, nil // newOffsets reads them from the file
	case o.allTopics:
		for t, ps := range committed {
			for p := range ps {
				add(t, p)
			}
		}
		return targets, nil
	}
	var whole []string
	for _, spec := range o.topics {
		t, ps, err := parseTopicPartitions(spec)
		if err != nil {
			return nil, err
		}
		if ps == nil {
			whole = append(whole, t)
		}
		for _, p := range ps {
			add(t, p)
		}
	}
	if len(whole) > 0 {
		md, err := adm.Metadata(ctx, whole...)
		if err != nil {
			return nil, fmt.Errorf("looking up topics: %w", err)
		}
		for _, t := range whole {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil {
				err := error(kerr.UnknownTopicOrPartition)
				if ok {
					err = td.Err
				}
				return nil, fmt.Errorf("topic %q: %w", t, err)
			}
			for _, p := range td.Partitions.Numbers() {
				add(t, p)
			}
		}
	}
	return targets, nil
}

// newOffsets sets each target to its new offset by the scenario. targets
// is empty for --from-file, which names its own.
func (o *resetOpts) newOffsets(ctx context.Context, targets map[string]map[int32]int64, committed kadm.OffsetResponses) error {
	if o.fromFile != "" {
		read, err := readResetCSV(o.fromFile, o.group)
		if err != nil {
			return err
		}
		maps.Copy(targets, read)
		if o.dataPlane == "" {
			return nil
		}
		// With a data plane, the file's offsets are kept within each
		// partition's, as Kafka's tool keeps them (below).
	}
	var topics []string
	for t := range targets {
		topics = append(topics, t)
	}
	var starts, ends, at kadm.ListedOffsets
	if o.dataPlane != "" {
		dp, done, err := dataPlaneAdmin(o.dataPlane)
		if err != nil {
			return err
		}
		defer done()
		if starts, err = dp.ListStartOffsets(ctx, topics...); err != nil {
			return fmt.Errorf("--data-plane: listing start offsets: %w", err)
		}
		if ends, err = dp.ListEndOffsets(ctx, topics...); err != nil {
			return fmt.Errorf("--data-plane: listing end offsets: %w", err)
		}
		if o.set["to-datetime"] || o.set["by-duration"] {
			when, err := o.resetTime()
			if err != nil {
				return err
			}
			if at, err = dp.ListOffsetsAfterMilli(ctx, when.UnixMilli(), topics...); err != nil {
				return fmt.Errorf("--data-plane: listing offsets after %v: %w", when, err)
			}
		}
	}
	lookup := func(l kadm.ListedOffsets, t string, p int32) (int64, error) {
		o, ok := l.Lookup(t, p)
		switch {
		case !ok:
			return 0, fmt.Errorf("the data plane does not know %s-%d", t, p)
		case o.Err != nil:
			return 0, fmt.Errorf("the data plane's offsets of %s-%d: %w", t, p, o.Err)
		}
		return o.Offset, nil
	}
	for t, ps := range targets {
		for p, cur := range ps {
			var next int64
			var err error
			switch {
			case o.set["from-file"]:
				next = cur
			case o.set["to-offset"]:
				next = o.toOffset
			case o.set["to-current"] && cur >= 0:
				next = cur
			case o.set["to-current"]:
				// Kafka's tool resets a partition with no committed offset
				// to its log end (resetToCurrent).
				if o.dataPlane == "" {
					return fmt.Errorf("%s-%d has no committed offset: --to-current takes its log end offset then, which needs --data-plane", t, p)
				}
				next, err = lookup(ends, t, p)
			case o.set["shift-by"]:
				if cur < 0 {
					return fmt.Errorf("cannot shift the offset of %s-%d: it has no committed offset", t, p)
				}
				next = cur + o.shiftBy
			case o.set["to-earliest"]:
				next, err = lookup(starts, t, p)
			case o.set["to-latest"]:
				next, err = lookup(ends, t, p)
			default: // to-datetime, by-duration
				if next, err = lookup(at, t, p); err == nil && next < 0 {
					next, err = lookup(ends, t, p) // nothing that late: the end
				}
			}
			if err != nil {
				return err
			}
			if o.dataPlane != "" {
				lo, err := lookup(starts, t, p)
				if err != nil {
					return err
				}
				hi, err := lookup(ends, t, p)
				if err != nil {
					return err
				}
				next = min(max(next, lo), hi)
			}
			ps[p] = max(next, 0)
		}
	}
	return nil
}

// checkPartitionsExist fails, before anything is committed, when a target
// names a partition the cluster's topics do not have, as Kafka's tool
// checks every partition first (a commit would take the others and refuse
// that one).
func checkPartitionsExist(ctx context.Context, adm *kadm.Client, targets map[string]map[int32]int64) error {
	if len(targets) == 0 {
		return nil
	}
	topics := slices.Collect(maps.Keys(targets))
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("looking up topics: %w", err)
	}
	var missing []string
	for t, ps := range targets {
		td, ok := md.Topics[t]
		for p := range ps {
			if !ok || td.Err != nil {
				missing = append(missing, fmt.Sprintf("%s-%d", t, p))
				continue
			}
			if _, ok := td.Partitions[p]; !ok {
				missing = append(missing, fmt.Sprintf("%s-%d", t, p))
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("The partitions %q do not exist", strings.Join(missing, ","))
	}
	return nil
}

// isoDuration is Java's Duration.parse format that Kafka's --by-duration
// takes: PnDTnHnMn.nS, every part optional.
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// resetTime is the time --to-datetime or --by-duration names.
func (o *resetOpts) resetTime() (time.Time, error) {
	if o.set["by-duration"] {
		m := isoDuration.FindStringSubmatch(strings.ToUpper(o.byDuration))
		if m == nil || o.byDuration == "P" || strings.HasSuffix(strings.ToUpper(o.byDuration), "T") {
			return time.Time{}, fmt.Errorf("--by-duration %q: want an ISO-8601 duration such as PT30M or P1DT2H", o.byDuration)
		}
		var d time.Duration
		for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
			if m[i+1] != "" {
				n, _ := strconv.ParseInt(m[i+1], 10, 64)
				d += time.Duration(n) * unit
			}
		}
		if m[4] != "" {
			s, _ := strconv.ParseFloat(m[4], 64)
			d += time.Duration(s * float64(time.Second))
		}
		return time.Now().Add(-d), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, o.toDatetime, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: want YYYY-MM-DDTHH:mm:SS.sss, with a zone (Z, +01:00) or in local time", o.toDatetime)
}

// readResetCSV reads --from-file: lines topic,partition,offset, or
// group,topic,partition,offset (only group's lines count), as --export
// writes them.
func readResetCSV(path, group string) (map[string]map[int32]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--from-file: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	out := map[string]map[int32]int64{}
	for line := 1; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--from-file %s: %w", path, err)
		}
		switch len(rec) {
		case 4:
			if rec[0] != group {
				continue
			}
			rec = rec[1:]
		case 3:
		default:
			return nil, fmt.Errorf("--from-file %s line %d: want topic,partition,offset", path, line)
		}
		p, perr := strconv.ParseInt(rec[1], 10, 32)
		at, oerr := strconv.ParseInt(rec[2], 10, 64)
		if perr != nil || oerr != nil || p < 0 || at < 0 {
			return nil, fmt.Errorf("--from-file %s line %d: %q is not topic,partition,offset", path, line, strings.Join(rec, ","))
		}
		if out[rec[0]] == nil {
			out[rec[0]] = map[int32]int64{}
		}
		out[rec[0]][int32(p)] = at
	}
}

// resetRow is one partition's new offset.
type resetRow struct {
	topic     string
	partition int32
	offset    int64
}

func sortedReset(targets map[string]map[int32]int64) []resetRow {
	var rows []resetRow
	for t, ps := range targets {
		for p, at := range ps {
			rows = append(rows, resetRow{t, p, at})
		}
	}
	slices.SortFunc(rows, func(a, b resetRow) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return rows
}

// printReset prints the new offsets in kafka-consumer-groups.sh's table:
// GROUP TOPIC PARTITION NEW-OFFSET, group and topic at least 15 wide.
func printReset(w io.Writer, group string, targets map[string]map[int32]int64) {
	rows := sortedReset(targets)
	if len(rows) == 0 {
		return
	}
	wt := 15
	for _, r := range rows {
		wt = widest(wt, r.topic)
	}
	format := fmt.Sprintf("\n%%-%ds %%-%ds %%-10s %%s", widest(15, group), wt)
	fmt.Fprintf(w, format, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
	for _, r := range rows {
		fmt.Fprintf(w, format, group, r.topic, strconv.Itoa(int(r.partition)), strconv.FormatInt(r.offset, 10))
	}
	fmt.Fprintln(w)
}

// writeResetCSV writes the new offsets as --export does: topic,partition,offset.
func writeResetCSV(w io.Writer, targets map[string]map[int32]int64) error {
	cw := csv.NewWriter(w)
	for _, r := range sortedReset(targets) {
		if err := cw.Write([]string{r.topic, strconv.Itoa(int(r.partition)), strconv.FormatInt(r.offset, 10)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// splitBrokers splits a host:port,... list, dropping blanks.
func splitBrokers(s string) []string {
	var brokers []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return brokers
}
