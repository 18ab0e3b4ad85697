package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/cluster"
)

// newClusterCmd is `kcoord cluster`: the admin API of a node's --http-addr.
func newClusterCmd() *cobra.Command {
	var addr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster's nodes, shards and feature levels, remove a node",
		Long: `Talk to a node's admin API on its --http-addr. Any node answers: a
remove-node is forwarded to the node that leads the metadata group.`,
	}
	cmd.PersistentFlags().StringVar(&addr, "http-addr", defaultHTTPAddr, "a node's HTTP host:port [$"+envName("http-addr")+"]")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 15*time.Second, "give up after this long")
	base := func(cmd *cobra.Command) string {
		if v := os.Getenv(envName("http-addr")); v != "" && !cmd.Flags().Changed("http-addr") {
			addr = v
		}
		return baseURL(addr)
	}

	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Each node's state, replicas and leaderships; each shard's voters, leader, term and applied index",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			body, err := adminCall(ctx, http.MethodGet, base(cmd)+"/v1/cluster/status")
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var st cluster.ClusterStatus
			if err := json.Unmarshal(body, &st); err != nil {
				return fmt.Errorf("status: %w", err)
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON, for tools")

	remove := &cobra.Command{
		Use:   "remove-node ID",
		Short: "Move every replica off node ID, then leave it holding none (drained)",
		Long: `Mark node ID draining: it takes no replica from now on, and every shard it
holds gets a replica elsewhere first and loses this node's after (leadership
moves off it before). "kcoord cluster status" shows the node drained when
nothing is left on it; it can then be stopped. A node that is dead for good
is removed the same way: its replicas are re-created on the other nodes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil || id < 0 {
				return fmt.Errorf("node id %q: want a non-negative integer", args[0])
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if _, err := adminCall(ctx, http.MethodPost, fmt.Sprintf("%s/v1/cluster/nodes/%d/remove", base(cmd), id)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d is draining: its replicas move to the other nodes; \"kcoord cluster status\" shows it drained when none is left\n", id)
			return nil
		},
	}
	cmd.AddCommand(status, remove, newFeaturesCmd(base, &timeout))
	return cmd
}

// adminCall sends one admin request and returns the body of a 200 answer;
// any other answer is an error with the API's message.
func adminCall(ctx context.Context, method, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, &adminStatusError{code: resp.StatusCode, msg: fmt.Sprintf("%s: %s", resp.Status, e.Error)}
		}
		return nil, &adminStatusError{code: resp.StatusCode, msg: fmt.Sprintf("%s answered %s", url, resp.Status)}
	}
	return body, nil
}

// adminStatusError is an admin API answer other than 200.
type adminStatusError struct {
	code int
	msg  string
}

func (e *adminStatusError) Error() string { return e.msg }

// printStatus writes the status as two tables, nodes then shards, and a
// summary line.
func printStatus(w io.Writer, st cluster.ClusterStatus) error {
	meta := "unknown"
	if st.MetaLeader >= 0 {
		meta = fmt.Sprintf("node %d", st.MetaLeader)
	}
	fmt.Fprintf(w, "cluster %s, as node %d sees it; metadata leader: %s\n\n", st.ClusterID, st.Node, meta)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tPLACEMENT\tREPLICAS\tLEADS\tKAFKA\tRAFT")
	for _, n := range st.Nodes {
		state := n.State
		if n.Disk != "" {
			state += ", fenced: disk " + string(n.Disk)
		}
		if n.SlowDisk {
			state += ", slow disk"
		}
		if !n.Reported && n.State != "dead" {
			state += " (no report)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", n.ID, state, dash(n.Placement), n.Replicas, n.Leads, dash(n.KafkaAddr), dash(n.RaftAddr))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "SHARD\tLEADER\tTERM\tAPPLIED\tVOTERS\tNON-VOTERS\tDESIRED\tFLAGS")
	for _, s := range st.Shards {
		shard := strconv.Itoa(int(s.Shard))
		if s.Shard == cluster.MetaShard {
			shard = "meta"
		}
		leader := "-"
		if s.Leader >= 0 {
			leader = strconv.Itoa(int(s.Leader))
		}
		var flags []string
		if s.UnderReplicated {
			flags = append(flags, "UNDER-REPLICATED")
		}
		if s.Moving {
			flags = append(flags, "moving")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", shard, leader, s.Term, s.AppliedIndex,
			ids(s.Voters), ids(s.Nonvoters), ids(s.Desired), dash(strings.Join(flags, ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	groupShards := 0
	for _, s := range st.Shards {
		if s.Shard != cluster.MetaShard {
			groupShards++
		}
	}
	_, err := fmt.Fprintf(w, "\n%d nodes, %d group shards and the metadata shard: %d under-replicated, %d moving\n", len(st.Nodes), groupShards, st.UnderReplicated, st.Moving)
	return err
}

func ids(v []int32) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
