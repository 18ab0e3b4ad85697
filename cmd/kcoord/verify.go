package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/chaos"
)

// errAnomalies makes the process exit 1 after a report that found
// anomalies (the report itself has been printed).
var errAnomalies = errors.New("anomalies found")

func newVerifyCmd() *cobra.Command {
	var (
		bootstrap string
		duration  time.Duration
		bound     time.Duration
		out       string
		w         = chaos.DefaultWorkloadConfig()
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a running Kafka-compatible cluster's consumer groups and offsets while you fault it",
		Long: `Run a consumer-group workload against any Kafka-compatible cluster for
--duration, then check what it saw: franz-go consumer groups (eager and
cooperative, static members, members joining and leaving) commit with their
generation, raw clients commit and fetch offsets, and some offsets are
committed once and only read afterwards. Fault the cluster however you like
meanwhile (kill, pause, partition, restart nodes); stop faulting before the
duration ends so the checks can see it recover.

The checks: every commit and fetch per (group, topic, partition) is
linearizable (porcupine); no acknowledged commit is lost; no partition is
assigned to two members in one generation, and a cooperative group hands a
partition over only after its owner revoked it; every group is Stable with
all partitions assigned within --liveness-bound after the run. It prints a
table per check and, last, "chaos: N ops, F faults, A anomalies"; it exits 1
when A > 0 and saves the history (and porcupine's visualisation of any
register that failed) in --out.

KIP-848 groups (--kip848-groups) run the consumer protocol with the
server assignors uniform and range. Before they start, a lone member asks
the server for each assignor; a group that never settles quotes what that
member was answered. On a server without ConsumerGroupHeartbeat v1 (before
Kafka 4.0) they are skipped, with a warning and a note in the report.

It creates the topic --topic with --partitions partitions if it does not
exist, and uses groups named after --prefix.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			brokers, err := bootstrapServers(cmd, bootstrap)
			if err != nil {
				return err
			}
			w.Brokers = append(w.Brokers, brokers...)
			if duration <= 0 {
				return fmt.Errorf("--duration %v: must be positive", duration)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			stdout := cmd.OutOrStdout()
			progress := func(format string, args ...any) {
				fmt.Fprintf(cmd.ErrOrStderr(), "verify: "+format+"\n", args...)
			}
			rep, err := chaos.Run(ctx, chaos.RunConfig{
				Workload: w, Duration: duration, LivenessBound: bound, Dir: out, Progress: progress,
			})
			if err != nil {
				return err
			}
			rep.Write(stdout)
			if rep.Anomalies() > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "verify: the history is in %s\n", out)
				return errAnomalies
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&bootstrap, "bootstrap-server", "127.0.0.1:9092", "the cluster's brokers, host:port,... [$KCOORD_BOOTSTRAP_SERVER]")
	f.DurationVar(&duration, "duration", time.Minute, "how long the workload runs")
	f.DurationVar(&bound, "liveness-bound", time.Minute, "how long groups may take to be Stable after the run")
	f.StringVar(&out, "out", "kcoord-verify-out", "where the history of a run with anomalies goes")
	f.IntVar(&w.Groups, "groups", w.Groups, "consumer groups (half eager range, half cooperative-sticky)")
	f.IntVar(&w.KIP848Groups, "kip848-groups", w.KIP848Groups, "consumer groups on the consumer protocol, KIP-848 (half uniform, half range)")
	f.IntVar(&w.Members, "members", w.Members, "members per consumer group")
	f.IntVar(&w.RegisterGroups, "register-groups", w.RegisterGroups, "groups raw clients commit to and fetch from")
	f.IntVar(&w.ColdGroups, "cold-groups", w.ColdGroups, "groups committed once and then only read")
	f.IntVar(&w.Workers, "workers", w.Workers, "raw committers and fetchers")
	f.StringVar(&w.Topic, "topic", w.Topic, "the topic the groups consume")
	f.Int32Var(&w.Partitions, "partitions", w.Partitions, "partitions of --topic when it is created")
	f.StringVar(&w.Prefix, "prefix", "", "group name prefix (default: kcoord-verify- and a random suffix)")
	f.DurationVar(&w.Churn, "churn", w.Churn, "how often a member leaves and another joins (0: never)")
	f.DurationVar(&w.SessionTimeout, "session-timeout", w.SessionTimeout, "the members' session timeout")
	return cmd
}

// bootstrapServers is the --bootstrap-server list of cmd (flag value
// bootstrap, or $KCOORD_BOOTSTRAP_SERVER when the flag is not given), split
// at commas; an empty list is an error.
func bootstrapServers(cmd *cobra.Command, bootstrap string) ([]string, error) {
	if v := os.Getenv("KCOORD_BOOTSTRAP_SERVER"); v != "" && !cmd.Flags().Changed("bootstrap-server") {
		bootstrap = v
	}
	brokers := splitBrokers(bootstrap)
	if len(brokers) == 0 {
		return nil, errors.New("--bootstrap-server: give at least one host:port")
	}
	return brokers, nil
}
