package main

import (
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

// newTopicsCmd returns "kcoord topics", kafka-topics.sh's create, list,
// describe and delete over the Kafka protocol (kadm), with its output.
// kcoord keeps a registry of topics (names, ids, partition counts) so that
// OffsetCommit and OffsetFetch can check what they name; the records live
// in the data plane.
func newTopicsCmd() *cobra.Command {
	g := &adminCLI{}
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "Create, list, describe and delete topics",
		Long: `Manage topics over the Kafka protocol, as kafka-topics.sh does. Against
kcoord this is its topic registry: the topics whose offsets groups may
commit (offsets.commit checks them, as Kafka does).`,
		Args: cobra.NoArgs,
	}
	g.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(g.topicCreateCmd(), g.topicListCmd(), g.topicDescribeCmd(), g.topicDeleteCmd())
	return cmd
}

// topicError prints err as kafka-topics.sh does and returns it.
func topicError(w io.Writer, err error) error {
	fmt.Fprintf(w, "Error while executing topic command : %s\n", err)
	return err
}

func (g *adminCLI) topicCreateCmd() *cobra.Command {
	var partitions int32
	var replication int16
	var ifNotExists bool
	cmd := &cobra.Command{
		Use:   "create TOPIC --partitions N",
		Short: "Create a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			switch {
			case partitions < 1:
				return topicError(cmd.OutOrStdout(), errors.New("The partitions must be greater than 0"))
			case replication < -1 || replication == 0:
				return topicError(cmd.OutOrStdout(), errors.New("The replication factor must be between 1 and 32767 inclusive"))
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := adm.CreateTopic(ctx, partitions, replication, nil, topic)
			if err == nil {
				err = resp.Err
			}
			switch {
			case errors.Is(err, kerr.TopicAlreadyExists):
				if ifNotExists {
					return nil
				}
				return topicError(cmd.OutOrStdout(), fmt.Errorf("Topic '%s' already exists.", topic))
			case err != nil:
				return topicError(cmd.OutOrStdout(), kafkaMessage(err, resp.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created topic %s.\n", topic)
			return nil
		},
	}
	cmd.Flags().Int32Var(&partitions, "partitions", 0, "the number of partitions")
	cmd.Flags().Int16Var(&replication, "replication-factor", -1, "the replication factor (default: the cluster's)")
	cmd.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed when the topic exists already")
	_ = cmd.MarkFlagRequired("partitions")
	return cmd
}

func (g *adminCLI) topicListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the topics, one per line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			tds, err := adm.ListTopicsWithInternal(ctx)
			if err != nil {
				return topicError(cmd.OutOrStdout(), err)
			}
			for _, name := range tds.Names() {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
}

func (g *adminCLI) topicDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe [TOPIC]",
		Short: "Describe a topic (every topic without one)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			tds, err := adm.ListTopicsWithInternal(ctx, args...)
			if err != nil {
				return topicError(cmd.OutOrStdout(), err)
			}
			names := tds.Names()
			if len(args) == 1 {
				if td, ok := tds[args[0]]; !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
					return topicError(cmd.OutOrStdout(), fmt.Errorf("Topic '%s' does not exist as expected", args[0]))
				}
				names = args
			}
			for _, name := range names {
				td := tds[name]
				if td.Err != nil {
					return topicError(cmd.OutOrStdout(), fmt.Errorf("topic %q: %w", name, td.Err))
				}
				printTopic(cmd.OutOrStdout(), td)
			}
			return nil
		},
	}
}

// printTopic prints td as kafka-topics.sh --describe does: a line for the
// topic, then one per partition, tab separated.
func printTopic(w io.Writer, td kadm.TopicDetail) {
	parts := td.Partitions.Sorted()
	rf := 0
	if len(parts) > 0 {
		rf = len(parts[0].Replicas)
	}
	var b strings.Builder
	b.WriteString("Topic: " + td.Topic)
	if td.ID != (kadm.TopicID{}) {
		b.WriteString("\tTopicId: " + td.ID.String())
	}
	fmt.Fprintf(&b, "\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: \n", len(parts), rf)
	for _, p := range parts {
		leader := "none"
		if p.Leader >= 0 {
			leader = strconv.Itoa(int(p.Leader))
		}
		fmt.Fprintf(&b, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\tElr: N/A\tLastKnownElr: N/A\n",
			td.Topic, p.Partition, leader, joinIDs(p.Replicas), joinIDs(p.ISR))
	}
	_, _ = io.WriteString(w, b.String())
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range slices.Sorted(slices.Values(ids)) {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

func (g *adminCLI) topicDeleteCmd() *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := adm.DeleteTopic(ctx, args[0])
			if err == nil {
				err = resp.Err
			}
			switch {
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				if ifExists {
					return nil
				}
				return topicError(cmd.OutOrStdout(), fmt.Errorf("Topic '%s' does not exist as expected", args[0]))
			case err != nil:
				return topicError(cmd.OutOrStdout(), kafkaMessage(err, resp.ErrMessage))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "succeed when the topic does not exist")
	return cmd
}

// kafkaMessage is err with the broker's message for it, when it sent one.
func kafkaMessage(err error, message string) error {
	if message != "" {
		return fmt.Errorf("%s: %w", message, err)
	}
	return err
}
