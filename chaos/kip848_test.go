package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// startKfake starts franz-go's in-memory kfake with the verify topic of
// four partitions, plus opts.
func startKfake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	fake, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, "kcoord-verify")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake
}

// kip848Workload is shortWorkload with one classic and two KIP-848
// groups (uniform, then range), each with a static member.
func kip848Workload(brokers []string, prefix string) WorkloadConfig {
	cfg := shortWorkload(brokers)
	cfg.Prefix = prefix
	cfg.Groups, cfg.KIP848Groups = 1, 2
	return cfg
}

func checkNamed(t *testing.T, rep *Report, name string) CheckResult {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the report has no %s check", name)
	return CheckResult{}
}

// TestVerifyPassesKIP848GroupsAgainstKfake runs the workload, fault-free,
// against kfake for 20 s. kfake assigns the KIP-848 groups' partitions
// but describes the assignments by topic id with an empty topic name
// (Kafka names them): liveness must match the topic by its id, pass, and
// say what it saw through.
func TestVerifyPassesKIP848GroupsAgainstKfake(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s workload")
	}
	t.Parallel()
	fake := startKfake(t)
	rep, err := Run(testCtx(t), RunConfig{
		Workload:      kip848Workload(fake.ListenAddrs(), "kfake-848"),
		Duration:      20 * time.Second,
		LivenessBound: 20 * time.Second,
		Progress:      t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if rep.Anomalies() != 0 {
		t.Fatalf("%d anomalies in a fault-free run against kfake", rep.Anomalies())
	}
	liveness := checkNamed(t, rep, "liveness")
	if liveness.Checked != 3 {
		t.Fatalf("liveness checked %d groups, want the 3 the workload ran", liveness.Checked)
	}
	if !strings.Contains(strings.Join(liveness.Notes, "\n"), "kfake-848-k0, kfake-848-k1 by topic id with an empty topic name") {
		t.Fatalf("liveness does not name kfake's id-only ConsumerGroupDescribe: %q", liveness.Notes)
	}
}

// TestVerifyNamesAServerAssignorTheServerLacks runs the workload against
// a kfake that answers UNSUPPORTED_ASSIGNOR to every ConsumerGroupHeartbeat
// asking for "range", as a Kafka whose group.consumer.assignors leaves
// range out does: the range group never gets a partition, and its
// liveness failure must say why.
func TestVerifyNamesAServerAssignorTheServerLacks(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s workload")
	}
	t.Parallel()
	fake := startKfake(t)
	fake.ControlKey(kmsg.ConsumerGroupHeartbeat.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
		if req.ServerAssignor == nil || *req.ServerAssignor != "range" {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedAssignor.Code
		resp.ErrorMessage = kmsg.StringPtr("ServerAssignor range is not supported. Supported assignors: uniform.")
		return resp, nil, true
	})
	cfg := kip848Workload(fake.ListenAddrs(), "norange")
	cfg.Churn = 0
	// The uniform group must settle within the bound on a loaded machine
	// (it ran into a 5 s bound in CI); the range group never does.
	rep, err := Run(testCtx(t), RunConfig{Workload: cfg, Duration: 5 * time.Second, LivenessBound: 15 * time.Second, Progress: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	liveness := checkNamed(t, rep, "liveness")
	if len(liveness.Anomalies) != 1 {
		t.Fatalf("liveness found %d anomalies, want the range group's alone: %q", len(liveness.Anomalies), liveness.Anomalies)
	}
	got := liveness.Anomalies[0]
	for _, want := range []string{"norange-k1 not stable", "its KIP-848 members were never assigned a partition",
		`a lone member asking for server assignor "range"`, "ConsumerGroupHeartbeat answered UNSUPPORTED_ASSIGNOR"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the range group's liveness failure does not say %q: %s", want, got)
		}
	}
}

// TestVerifySkipsKIP848GroupsOnAServerWithoutTheConsumerProtocol runs
// the workload against a kfake that answers ApiVersions as Kafka 3.9
// (ConsumerGroupHeartbeat v0 at most): franz-go would run the KIP-848
// groups as classic ones, so verify skips them and says so, and the run
// passes.
func TestVerifySkipsKIP848GroupsOnAServerWithoutTheConsumerProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5 s workload")
	}
	t.Parallel()
	fake := startKfake(t, kfake.MaxVersions(kversion.V3_9_0()))
	var warnings []string
	rep, err := Run(testCtx(t), RunConfig{
		Workload: kip848Workload(fake.ListenAddrs(), "no848"),
		Duration: 4 * time.Second,
		Progress: func(format string, args ...any) {
			if strings.HasPrefix(format, "warning:") {
				warnings = append(warnings, format)
			}
			t.Logf(format, args...)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if rep.Anomalies() != 0 {
		t.Fatalf("%d anomalies", rep.Anomalies())
	}
	liveness := checkNamed(t, rep, "liveness")
	if liveness.Checked != 1 || !strings.Contains(liveness.Summary, "2 KIP-848 groups skipped") {
		t.Fatalf("liveness checked %d groups: %s", liveness.Checked, liveness.Summary)
	}
	if note := strings.Join(liveness.Notes, "\n"); !strings.Contains(note, "ApiVersions lists ConsumerGroupHeartbeat up to v0 only") {
		t.Fatalf("the skip does not name its cause: %q", liveness.Notes)
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warnings while the run started, want one", len(warnings))
	}
}

// TestKIP848ProbeNamesWhatTheServerAnswers probes kfake's server
// assignors: a lone member is assigned every partition by uniform and by
// range, and an assignor Kafka does not have is named with the error
// ConsumerGroupHeartbeat gave.
func TestKIP848ProbeNamesWhatTheServerAnswers(t *testing.T) {
	fake := startKfake(t)
	cfg := WorkloadConfig{Brokers: fake.ListenAddrs(), Prefix: "probe"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Partitions = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := probeKIP848(ctx, cfg, []string{"uniform", "range", "sticky"})
	if p.Absent != "" {
		t.Fatalf("kfake runs the consumer protocol, the probe says: %s", p.Absent)
	}
	for _, a := range []string{"uniform", "range"} {
		if why := p.Assignors[a]; why != "" {
			t.Errorf("%s: %s", a, why)
		}
	}
	if why := p.Assignors["sticky"]; !strings.HasPrefix(why, "ConsumerGroupHeartbeat answered UNSUPPORTED_ASSIGNOR") {
		t.Errorf("sticky: %q", why)
	}
}

// TestStableConsumerProblemMatchesTheTopicByNameOrID: a described
// assignment counts for the topic by name, or by id when the name is
// empty; an assignment of nothing says which topics it did name.
func TestStableConsumerProblemMatchesTheTopicByNameOrID(t *testing.T) {
	id, other := [16]byte{1}, [16]byte{2}
	topic := topicRef{name: "t", id: id}
	group := func(tps ...kmsg.AssignmentTopicPartition) kmsg.ConsumerGroupDescribeResponseGroup {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.State = "Stable"
		for _, tp := range tps {
			m := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			m.Assignment.TopicPartitions = []kmsg.AssignmentTopicPartition{tp}
			g.Members = append(g.Members, m)
		}
		return g
	}
	for _, tc := range []struct {
		name     string
		g        kmsg.ConsumerGroupDescribeResponseGroup
		why      string // a part of the problem; "" for none
		byIDOnly bool
	}{
		{"named", group(kmsg.AssignmentTopicPartition{Topic: "t", TopicID: id, Partitions: []int32{0, 1}}, kmsg.AssignmentTopicPartition{Topic: "t", TopicID: id, Partitions: []int32{2}}), "", false},
		{"id only", group(kmsg.AssignmentTopicPartition{TopicID: id, Partitions: []int32{0, 2}}, kmsg.AssignmentTopicPartition{TopicID: id, Partitions: []int32{1}}), "", true},
		{"twice", group(kmsg.AssignmentTopicPartition{Topic: "t", Partitions: []int32{0, 1}}, kmsg.AssignmentTopicPartition{Topic: "t", Partitions: []int32{1, 2}}), "partitions assigned [0 1 1 2] of 3", false},
		{"other topic", group(kmsg.AssignmentTopicPartition{TopicID: other, Partitions: []int32{0, 1, 2}}, kmsg.AssignmentTopicPartition{Topic: "u", Partitions: []int32{0}}),
			"none of the 3 partitions of t assigned to its 2 members; their assignment names an unnamed topic of id AgAAAAAAAAAAAAAAAAAAAA, u", false},
	} {
		why, byIDOnly := stableConsumerProblem(tc.g, topic, 3, 2)
		if tc.why == "" && why != "" || !strings.Contains(why, tc.why) || byIDOnly != tc.byIDOnly {
			t.Errorf("%s: problem %q, by id only %v; want %q, %v", tc.name, why, byIDOnly, tc.why, tc.byIDOnly)
		}
	}
}

// TestKIP848ProbeFindsNothingWrongWithKcoord probes a three-node
// in-process kcoord cluster: both server assignors give a lone member
// every partition, so the chaos suite's KIP-848 groups run and no
// liveness failure of theirs is blamed on the server assignor.
func TestKIP848ProbeFindsNothingWrongWithKcoord(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster")
	}
	_, brokers := startCluster(t)
	hist := NewHistory()
	w, err := NewWorkload(WorkloadConfig{Brokers: brokers, Prefix: "probe", Partitions: 4}, hist)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := w.createTopic(ctx); err != nil {
		t.Fatal(err)
	}
	p := probeKIP848(ctx, w.cfg, []string{"uniform", "range"})
	if p.Absent != "" || p.Assignors["uniform"] != "" || p.Assignors["range"] != "" {
		t.Fatalf("absent %q, uniform %q, range %q", p.Absent, p.Assignors["uniform"], p.Assignors["range"])
	}
}
