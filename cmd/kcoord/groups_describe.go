package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeOpts are "kcoord groups describe"'s flags.
type describeOpts struct {
	groups           []string
	all              bool
	members, state   bool
	offsets, verbose bool
	dataPlane        string
	out, diag        io.Writer // tables; state messages (stderr, as Kafka's tool)
	ends             kadm.ListedOffsets
}

// describeCmd is "kcoord groups describe (--group G ...|--all-groups)
// [--members|--offsets|--state] [--verbose] [--data-plane B]".
func (g *adminCLI) describeCmd() *cobra.Command {
	o := &describeOpts{}
	cmd := &cobra.Command{
		Use:   "describe (--group G ...|--all-groups)",
		Short: "Describe consumer groups: their offsets (default), members or state",
		Long: `Describes each group as kafka-consumer-groups.sh --describe does:
  --offsets (the default)  GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
  --members                GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
  --state                  GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
--verbose adds columns (LEADER-EPOCH; the members' assignments; the epochs).
kcoord stores no records, so LOG-END-OFFSET and LAG come from --data-plane,
the brokers that hold the topics, asked with ListOffsets; without it they
are "-".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			modes := 0
			for _, on := range []bool{o.members, o.state, o.offsets} {
				if on {
					modes++
				}
			}
			switch {
			case modes > 1:
				return errors.New("give at most one of --members, --offsets and --state")
			case len(o.groups) == 0 && !o.all:
				return errors.New("--group or --all-groups: name the groups to describe")
			case len(o.groups) > 0 && o.all:
				return errors.New("give --group or --all-groups, not both")
			}
			if v := os.Getenv("KCOORD_DATA_PLANE"); v != "" && !cmd.Flags().Changed("data-plane") {
				o.dataPlane = v
			}
			o.out, o.diag = cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			return o.run(ctx, adm)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.groups, "group", nil, "a group to describe (repeatable)")
	f.BoolVar(&o.all, "all-groups", false, "describe every group")
	f.BoolVar(&o.members, "members", false, "describe the members")
	f.BoolVar(&o.offsets, "offsets", false, "describe the committed offsets (the default)")
	f.BoolVar(&o.state, "state", false, "describe the state")
	f.BoolVar(&o.verbose, "verbose", false, "more columns")
	f.StringVar(&o.dataPlane, "data-plane", "", "the data plane's brokers, host:port,...: LOG-END-OFFSET and LAG come from them [$KCOORD_DATA_PLANE]")
	return cmd
}

func (o *describeOpts) run(ctx context.Context, adm *kadm.Client) error {
	names := o.groups
	if o.all {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return fmt.Errorf("listing groups: %w", err)
		}
		names = listed.Groups()
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return nil
	}
	described, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		return fmt.Errorf("describing groups: %w", err)
	}
	for _, name := range names {
		d, ok := described[name]
		if !ok {
			return fmt.Errorf("describing group %q: no answer for it", name)
		}
		if errors.Is(d.Err, kerr.GroupIDNotFound) {
			// Kafka 4 answers a group that does not exist so (KIP-1043);
			// earlier brokers describe it as Dead.
			d.Err, d.State = nil, "Dead"
		}
		if d.Err != nil {
			fmt.Fprintf(o.out, "\nError: Executing consumer group command failed due to %v\n", d.Err)
			return fmt.Errorf("describing group %q: %w", name, d.Err)
		}
		switch {
		case o.members:
			if o.memberState(d) {
				o.printMembers(d)
			}
		case o.state:
			if o.memberState(d) {
				o.printState(d)
			}
		default:
			if err := o.describeOffsets(ctx, adm, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// memberState prints what kafka-consumer-groups.sh says about a group's
// state before its table, and reports whether a table follows.
func (o *describeOpts) memberState(d kadm.DescribedGroup) bool {
	switch d.State {
	case "Dead":
		fmt.Fprintf(o.out, "\nError: Consumer group '%s' does not exist.\n", d.Group)
		return false
	case "Empty":
		fmt.Fprintf(o.diag, "\nConsumer group '%s' has no active members.\n", d.Group)
	case "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling":
		fmt.Fprintf(o.diag, "\nWarning: Consumer group '%s' is rebalancing.\n", d.Group)
	}
	return true
}

// offsetRow is one line of the offsets table.
type offsetRow struct {
	topic                          string
	partition                      int32
	current, end, lag, leaderEpoch string
	consumer, host, client         string
}

// describeOffsets prints the group's offsets table: each member's assigned
// partitions (the member with the most first, then by topic and
// partition), then the committed partitions no member holds.
func (o *describeOpts) describeOffsets(ctx context.Context, adm *kadm.Client, d kadm.DescribedGroup) error {
	if !o.memberState(d) {
		return nil
	}
	committed, err := adm.FetchOffsets(ctx, d.Group)
	if err != nil {
		return fmt.Errorf("fetching the offsets of group %q: %w", d.Group, err)
	}
	if err := committed.Error(); err != nil {
		return fmt.Errorf("fetching the offsets of group %q: %w", d.Group, err)
	}
	type owned struct {
		m     kadm.DescribedGroupMember
		parts []kadm.TopicPartitions
		n     int
	}
	var members []owned
	assigned := make(kadm.TopicsSet)
	for _, m := range d.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		var parts []kadm.TopicPartitions
		n := 0
		for _, t := range c.Topics {
			ps := slices.Clone(t.Partitions)
			slices.Sort(ps)
			parts = append(parts, kadm.TopicPartitions{Topic: t.Topic, Partitions: ps})
			assigned.Add(t.Topic, ps...)
			n += len(ps)
		}
		slices.SortFunc(parts, func(a, b kadm.TopicPartitions) int { return cmp.Compare(a.Topic, b.Topic) })
		if n > 0 {
			members = append(members, owned{m, parts, n})
		}
	}
	slices.SortStableFunc(members, func(a, b owned) int { return cmp.Compare(b.n, a.n) })

	topics := assigned.Topics()
	for t := range committed {
		topics = append(topics, t)
	}
	if err := o.fetchEnds(ctx, topics); err != nil {
		return err
	}
	row := func(topic string, p int32) offsetRow {
		r := offsetRow{topic: topic, partition: p, current: missing, end: missing, lag: missing, leaderEpoch: missing,
			consumer: missing, host: missing, client: missing}
		var cur int64 = -1
		if c, ok := committed.Lookup(topic, p); ok && c.At >= 0 {
			cur = c.At
			r.current = strconv.FormatInt(c.At, 10)
			if c.LeaderEpoch >= 0 {
				r.leaderEpoch = strconv.FormatInt(int64(c.LeaderEpoch), 10)
			}
		}
		if e, ok := o.ends.Lookup(topic, p); ok && e.Err == nil && e.Offset >= 0 {
			r.end = strconv.FormatInt(e.Offset, 10)
			if cur >= 0 {
				r.lag = strconv.FormatInt(e.Offset-cur, 10) // negative past the log end, as Kafka's tool shows it
			}
		}
		return r
	}
	var rows []offsetRow
	for _, m := range members {
		for _, t := range m.parts {
			for _, p := range t.Partitions {
				r := row(t.Topic, p)
				r.consumer, r.host, r.client = m.m.MemberID, m.m.ClientHost, m.m.ClientID
				rows = append(rows, r)
			}
		}
	}
	var unowned []offsetRow
	for t, ps := range committed {
		for p := range ps {
			if _, ok := assigned[t][p]; !ok {
				unowned = append(unowned, row(t, p))
			}
		}
	}
	slices.SortFunc(unowned, func(a, b offsetRow) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	rows = append(rows, unowned...)
	if len(rows) == 0 {
		// Nothing to show (the members hold nothing yet, or an Empty group
		// has no offsets): kafka-consumer-groups.sh prints no table, after
		// its note on the state (shouldPrintMemberState).
		return nil
	}
	o.printOffsets(d.Group, rows)
	return nil
}

// fetchEnds asks the data plane, when there is one, for the end offsets
// of topics.
func (o *describeOpts) fetchEnds(ctx context.Context, topics []string) error {
	o.ends = nil
	if o.dataPlane == "" || len(topics) == 0 {
		return nil
	}
	dp, done, err := dataPlaneAdmin(o.dataPlane)
	if err != nil {
		return err
	}
	defer done()
	slices.Sort(topics)
	ends, err := dp.ListEndOffsets(ctx, slices.Compact(topics)...)
	if err != nil {
		return fmt.Errorf("--data-plane: listing end offsets: %w", err)
	}
	o.ends = ends
	return nil
}

// printOffsets prints the offsets table in kafka-consumer-groups.sh's
// format: the group, topic, consumer-id and host columns as wide as their
// longest value (at least 15), every line led by a newline.
func (o *describeOpts) printOffsets(group string, rows []offsetRow) {
	wg, wt, wc, wh := widest(15, group), 15, 15, 15
	for _, r := range rows {
		wt, wc, wh = widest(wt, r.topic), widest(wc, r.consumer), widest(wh, r.host)
	}
	epoch := ""
	if o.verbose {
		epoch = "%-15s "
	}
	format := fmt.Sprintf("\n%%-%ds %%-%ds %%-10s %s%%-15s %%-15s %%-15s %%-%ds %%-%ds %%s", wg, wt, epoch, wc, wh)
	cells := func(group, topic, partition, leaderEpoch, current, end, lag, consumer, host, client string) []any {
		c := []any{group, topic, partition}
		if o.verbose {
			c = append(c, leaderEpoch)
		}
		return append(c, current, end, lag, consumer, host, client)
	}
	fmt.Fprintf(o.out, format, cells("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")...)
	for _, r := range rows {
		fmt.Fprintf(o.out, format, cells(group, r.topic, strconv.Itoa(int(r.partition)), r.leaderEpoch, r.current, r.end, r.lag, r.consumer, r.host, r.client)...)
	}
	fmt.Fprintln(o.out)
}

// printMembers prints the members table in kafka-consumer-groups.sh's
// format, with GROUP-INSTANCE-ID when a member has one and, with
// --verbose, Kafka 4's epoch and assignment columns (a classic group has
// no epochs and no target assignment: "-").
func (o *describeOpts) printMembers(d kadm.DescribedGroup) {
	type member struct {
		id, instance, host, client, partitions, assignment string
	}
	var ms []member
	withInstance := false
	wg, wc, wi, wh, wcl, wa := widest(15, d.Group), 15, 17, 15, 15, 20
	for _, m := range d.Members {
		r := member{id: m.MemberID, instance: missing, host: m.ClientHost, client: m.ClientID, partitions: "0", assignment: missing}
		if m.InstanceID != nil {
			r.instance, withInstance = *m.InstanceID, true
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			var parts []string
			n := 0
			topics := slices.Clone(c.Topics)
			slices.SortFunc(topics, func(a, b kmsg.ConsumerMemberAssignmentTopic) int { return cmp.Compare(a.Topic, b.Topic) })
			for _, t := range topics {
				if len(t.Partitions) == 0 {
					continue
				}
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				ids := make([]string, len(ps))
				for i, p := range ps {
					ids[i] = strconv.Itoa(int(p))
				}
				parts = append(parts, t.Topic+":"+strings.Join(ids, ","))
				n += len(ps)
			}
			r.partitions = strconv.Itoa(n)
			if len(parts) > 0 {
				r.assignment = strings.Join(parts, ";")
			}
		}
		wc, wi, wh, wcl, wa = widest(wc, r.id), widest(wi, r.instance), widest(wh, r.host), widest(wcl, r.client), widest(wa, r.assignment)
		ms = append(ms, r)
	}
	format := fmt.Sprintf("%%-%ds %%-%ds ", wg, wc)
	if withInstance {
		format += fmt.Sprintf("%%-%ds ", wi)
	}
	format += fmt.Sprintf("%%-%ds %%-%ds %%-15s ", wh, wcl)
	if o.verbose {
		format += fmt.Sprintf("%%-15s %%-%ds %%-15s %%-%ds", wa, wa)
	}
	cells := func(id, instance, host, client, partitions, epoch, assignment, targetEpoch, target string) []any {
		c := []any{d.Group, id}
		if withInstance {
			c = append(c, instance)
		}
		c = append(c, host, client, partitions)
		if o.verbose {
			c = append(c, epoch, assignment, targetEpoch, target)
		}
		return c
	}
	header := cells("CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")
	header[0] = "GROUP"
	fmt.Fprintf(o.out, "\n"+format+"\n", header...)
	for _, m := range ms {
		fmt.Fprintf(o.out, format+"\n", cells(m.id, m.instance, m.host, m.client, m.partitions, missing, m.assignment, missing, missing)...)
	}
}

// printState prints the state table in kafka-consumer-groups.sh's
// format; the coordinator is "host:port  (id)". --verbose adds Kafka 4's
// GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH, which a classic group does not
// have ("-").
func (o *describeOpts) printState(d kadm.DescribedGroup) {
	coord := fmt.Sprintf("%s:%d  (%d)", d.Coordinator.Host, d.Coordinator.Port, d.Coordinator.NodeID)
	strategy := d.Protocol
	if strategy == "" {
		strategy = missing
	}
	wg, wco := widest(15, d.Group), widest(25, coord)
	format := fmt.Sprintf("\n%%-%ds %%-%ds %%-20s %%-20s ", wg, wco)
	if o.verbose {
		format += "%-15s %-25s "
	}
	format += "%s"
	cells := func(group, coord, strategy, state, epoch, targetEpoch, members string) []any {
		c := []any{group, coord, strategy, state}
		if o.verbose {
			c = append(c, epoch, targetEpoch)
		}
		return append(c, members)
	}
	fmt.Fprintf(o.out, format, cells("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")...)
	fmt.Fprintf(o.out, format, cells(d.Group, coord, strategy, d.State, missing, missing, strconv.Itoa(len(d.Members)))...)
	fmt.Fprintln(o.out)
}
