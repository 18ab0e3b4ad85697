package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupStates are the states ListGroups names, as kafka-consumer-groups.sh's
// --state accepts them (in any case): the classic groups', then the two
// only KIP-848 consumer groups have (Kafka 4's GroupState).
var groupStates = []string{"PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"}

// missing is what the tables print for a value that does not exist, as
// kafka-consumer-groups.sh does.
const missing = "-"

// defaultCLITimeout bounds a "kcoord groups" or "kcoord topics" command.
const defaultCLITimeout = 30 * time.Second

// newGroupsCmd returns "kcoord groups", kafka-consumer-groups.sh's
// commands over the Kafka protocol (franz-go's kadm), with its flags,
// columns and messages, so that it works against kcoord and against any
// Kafka-compatible cluster.
func newGroupsCmd() *cobra.Command {
	g := &adminCLI{}
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List, describe and delete consumer groups and their offsets",
		Long: `Manage consumer groups over the Kafka protocol, as kafka-consumer-groups.sh
does (same flags, columns and messages), against kcoord or any
Kafka-compatible cluster.`,
		Args: cobra.NoArgs,
	}
	g.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(g.listCmd(), g.describeCmd(), g.resetCmd(), g.deleteCmd(), g.deleteOffsetsCmd())
	return cmd
}

// listCmd is "kcoord groups list [--state [S,...]]".
func (g *adminCLI) listCmd() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the consumer groups, one per line",
		Long: `Lists the consumer groups, one per line. --state adds a STATE column; with
states (` + strings.Join(groupStates, ", ") + `; any case, comma separated)
it lists only the groups in them.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			withState := cmd.Flags().Changed("state")
			if len(args) == 1 {
				// "--state stable", as kafka-consumer-groups.sh takes it: a
				// flag with an optional value takes the next word only as
				// --state=stable, so the word arrives as an argument.
				if !withState || state != " " {
					return fmt.Errorf("unexpected argument %q", args[0])
				}
				state = args[0]
			}
			filter, err := parseStates(state)
			if err != nil {
				return err
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			listed, err := adm.ListGroups(ctx, filter...)
			if err != nil {
				return fmt.Errorf("listing groups: %w", err)
			}
			printGroupList(cmd.OutOrStdout(), listed.Sorted(), withState)
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "show each group's state; with states, only the groups in them")
	cmd.Flags().Lookup("state").NoOptDefVal = " " // --state alone: every state, in a column
	return cmd
}

// parseStates parses --state's comma-separated states, in any case, into
// their ListGroups names. Blank means no filter.
func parseStates(s string) ([]string, error) {
	var states []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := slices.IndexFunc(groupStates, func(st string) bool { return strings.EqualFold(st, part) })
		if i < 0 {
			return nil, fmt.Errorf("--state %q: want one of %s", part, strings.Join(groupStates, ", "))
		}
		states = append(states, groupStates[i])
	}
	return states, nil
}

// printGroupList prints groups as kafka-consumer-groups.sh --list does: ids
// alone, or with --state a GROUP and STATE table whose first column is as
// wide as the longest id (at least 15) plus 10.
func printGroupList(w io.Writer, groups []kadm.ListedGroup, withState bool) {
	if !withState {
		for _, lg := range groups {
			fmt.Fprintln(w, lg.Group)
		}
		return
	}
	width := 15
	for _, lg := range groups {
		width = max(width, len(lg.Group))
	}
	format := fmt.Sprintf("%%-%ds %%-20s\n", width+10)
	fmt.Fprintf(w, format, "GROUP", "STATE")
	for _, lg := range groups {
		state := lg.State
		if state == "" {
			state = "Unknown"
		}
		fmt.Fprintf(w, format, lg.Group, state)
	}
}

// deleteCmd is "kcoord groups delete --group G [--group G2 ...]".
func (g *adminCLI) deleteCmd() *cobra.Command {
	var groups []string
	cmd := &cobra.Command{
		Use:   "delete --group G [--group G ...]",
		Short: "Delete consumer groups and their committed offsets",
		Long: `Deletes each group and its committed offsets. A group with members is not
deleted (NON_EMPTY_GROUP), as in Kafka.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(groups) == 0 {
				return errors.New("--group: name at least one group")
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteGroups(ctx, groups...)
			if err != nil {
				return fmt.Errorf("deleting groups: %w", err)
			}
			return printDeleted(cmd.OutOrStdout(), groups, resps)
		},
	}
	cmd.Flags().StringArrayVar(&groups, "group", nil, "a group to delete (repeatable)")
	return cmd
}

// printDeleted reports a DeleteGroups as kafka-consumer-groups.sh --delete
// does, and returns an error when a group was not deleted.
func printDeleted(w io.Writer, groups []string, resps kadm.DeleteGroupResponses) error {
	var deleted, failed []string
	for _, name := range groups {
		if r, ok := resps[name]; ok && r.Err == nil {
			deleted = append(deleted, name)
		} else {
			failed = append(failed, name)
		}
	}
	if len(failed) == 0 {
		fmt.Fprintf(w, "Deletion of requested consumer groups (%s) was successful.\n", quoteAll(deleted))
		return nil
	}
	fmt.Fprintf(w, "\nError: Deletion of some consumer groups failed:\n")
	for _, name := range failed {
		reason := errors.New("no answer for it")
		if r, ok := resps[name]; ok {
			reason = r.Err
		}
		fmt.Fprintf(w, "* Group '%s' could not be deleted due to: %v\n", name, reason)
	}
	if len(deleted) > 0 {
		fmt.Fprintf(w, "\nThese consumer groups were deleted successfully: %s\n", quoteAll(deleted))
	}
	return fmt.Errorf("%d of %d groups not deleted", len(failed), len(groups))
}

// quoteAll is names quoted and comma separated: 'a', 'b'.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// dataPlaneAdmin connects to --data-plane's brokers; the caller closes the
// client when done.
func dataPlaneAdmin(dataPlane string) (*kadm.Client, func(), error) {
	brokers := splitBrokers(dataPlane)
	if len(brokers) == 0 {
		return nil, nil, errors.New("--data-plane: give at least one host:port")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, fmt.Errorf("--data-plane: %w", err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// widest is the length of the longest of values, at least least.
func widest(least int, values ...string) int {
	for _, v := range values {
		least = max(least, len(v))
	}
	return least
}
