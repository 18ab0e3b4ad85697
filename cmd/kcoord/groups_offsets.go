package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// deleteOffsetsCmd is "kcoord groups delete-offsets --group G --topic
// T[:P,...] ...".
func (g *adminCLI) deleteOffsetsCmd() *cobra.Command {
	var group string
	var topics []string
	cmd := &cobra.Command{
		Use:   "delete-offsets --group G --topic T[:P,...] [--topic ...]",
		Short: "Delete a group's committed offsets of topics or partitions",
		Long: `Deletes the group's committed offsets of each --topic: all its partitions, or
those listed after a colon (T:0,2). Kafka refuses (GROUP_SUBSCRIBED_TO_TOPIC)
for a topic the group's members are subscribed to.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group == "" {
				return errors.New("--group: name the group")
			}
			if len(topics) == 0 {
				return errors.New("--topic: name at least one topic")
			}
			want := make(map[string][]int32) // nil: every partition
			for _, t := range topics {
				name, parts, err := parseTopicPartitions(t)
				if err != nil {
					return err
				}
				if parts == nil {
					want[name] = nil
				} else if cur, ok := want[name]; !ok || cur != nil {
					want[name] = append(cur, parts...)
				}
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			set := make(kadm.TopicsSet)
			var whole []string
			for t, ps := range want {
				if ps == nil {
					whole = append(whole, t)
				} else {
					set.Add(t, ps...)
				}
			}
			unknown := map[string]error{}
			if len(whole) > 0 {
				md, err := adm.Metadata(ctx, whole...)
				if err != nil {
					return fmt.Errorf("looking up topics: %w", err)
				}
				for _, t := range whole {
					d, ok := md.Topics[t]
					switch {
					case !ok:
						unknown[t] = kerr.UnknownTopicOrPartition
					case d.Err != nil:
						unknown[t] = d.Err
					default:
						set.Add(t, d.Partitions.Numbers()...)
					}
				}
			}
			var resps kadm.DeleteOffsetsResponses
			if len(set) > 0 {
				if resps, err = adm.DeleteOffsets(ctx, group, set); err != nil {
					if errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, kerr.NonEmptyGroup) ||
						errors.Is(err, kerr.InvalidGroupID) || errors.Is(err, kerr.GroupAuthorizationFailed) {
						fmt.Fprintf(cmd.OutOrStdout(), "\nError: %s\n", kerrDescription(err))
					}
					return fmt.Errorf("deleting offsets of group %q: %w", group, err)
				}
			}
			return printDeletedOffsets(cmd.OutOrStdout(), group, resps, unknown)
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "the group")
	cmd.Flags().StringArrayVar(&topics, "topic", nil, "a topic, or topic:partition,partition (repeatable)")
	return cmd
}

// parseTopicPartitions parses T or T:P,P,...; nil partitions mean all.
func parseTopicPartitions(s string) (string, []int32, error) {
	name, list, hasList := strings.Cut(s, ":")
	if name = strings.TrimSpace(name); name == "" {
		return "", nil, fmt.Errorf("--topic %q: name the topic", s)
	}
	if !hasList {
		return name, nil, nil
	}
	parts := []int32{}
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return "", nil, fmt.Errorf("--topic %q: partition %q is not a partition number", s, p)
		}
		parts = append(parts, int32(n))
	}
	return name, parts, nil
}

// kerrDescription is a Kafka error's description ("The group is not
// empty.") when it is one, else the error's text.
func kerrDescription(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Description
	}
	return err.Error()
}

// printDeletedOffsets reports a DeleteOffsets as kafka-consumer-groups.sh
// --delete-offsets does (Kafka 4.x): a summary line, then TOPIC PARTITION
// STATUS sorted by topic and partition ("-" for a topic that does not
// exist). It returns an error when a partition's offsets were not deleted.
func printDeletedOffsets(w io.Writer, group string, resps kadm.DeleteOffsetsResponses, unknown map[string]error) error {
	type row struct {
		topic, partition, status string
		p                        int32
	}
	var rows []row
	failed := 0
	for t, ps := range resps {
		for p, err := range ps {
			status := "Successful"
			if err != nil {
				status = "Error: " + kerrDescription(err)
				failed++
			}
			rows = append(rows, row{t, strconv.Itoa(int(p)), status, p})
		}
	}
	for t, err := range unknown {
		rows = append(rows, row{t, missing, "Error: " + kerrDescription(err), -1})
		failed++
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.p, b.p)) })
	if failed == 0 {
		fmt.Fprintf(w, "Request succeeded for deleting offsets from group %s.\n", group)
	} else {
		fmt.Fprintf(w, "Encountered some partition-level error, see the follow-up details.\n")
	}
	wt := 15
	for _, r := range rows {
		wt = widest(wt, r.topic)
	}
	format := fmt.Sprintf("\n%%-%ds %%-10s %%-15s", wt)
	fmt.Fprintf(w, format, "TOPIC", "PARTITION", "STATUS")
	for _, r := range rows {
		fmt.Fprintf(w, format, r.topic, r.partition, r.status)
	}
	fmt.Fprintln(w)
	if failed > 0 {
		return fmt.Errorf("%d partitions' offsets not deleted", failed)
	}
	return nil
}
