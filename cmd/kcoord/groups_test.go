package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/server"
)

// groupsFixture is a kcoord node with topic "t" (3 partitions) and a kfake
// data plane holding records for it: 10 in partition 0, 5 in partition 1.
type groupsFixture struct {
	addr, dataPlane string
	adm             *kadm.Client
}

func newGroupsFixture(t *testing.T) *groupsFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	f := &groupsFixture{addr: s.KafkaAddr().String()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f.adm = kadm.NewClient(cl)
	if _, err := f.adm.CreateTopic(ctx, 3, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}

	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	f.dataPlane = fake.ListenAddrs()[0]
	producer, err := kgo.NewClient(kgo.SeedBrokers(f.dataPlane), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for p, n := range map[int32]int{0: 10, 1: 5} {
		for range n {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// stableMember starts a kgo consumer of topic t in group, with clientID,
// and waits until the group is Stable; the test's end closes it.
func (f *groupsFixture) stableMember(t *testing.T, group, clientID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	member, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.ClientID(clientID), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics("t"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); member.Close() })
	go func() {
		for ctx.Err() == nil && !member.PollFetches(ctx).IsClientClosed() {
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := f.adm.DescribeGroups(ctx, group)
		if err == nil && d[group].State == "Stable" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not Stable: %+v, %v", group, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// commit commits offsets for group outside group management.
func (f *groupsFixture) commit(t *testing.T, group string, offsets map[int32]int64) {
	t.Helper()
	offs := make(kadm.Offsets)
	for p, at := range offsets {
		offs.Add(kadm.Offset{Topic: "t", Partition: p, At: at, LeaderEpoch: -1})
	}
	resps, err := f.adm.CommitOffsets(context.Background(), group, offs)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// groups runs "kcoord groups args..." against the fixture and returns its
// stdout, its stderr and its error.
func (f *groupsFixture) groups(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"groups", "--bootstrap-server", f.addr}, args...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// rows are out's non-blank lines split into fields.
func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(out, "\n") {
		if fs := strings.Fields(line); len(fs) > 0 {
			rs = append(rs, fs)
		}
	}
	return rs
}

func wantRows(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := rows(out)
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d:\n%s", what, len(got), len(want), out)
	}
	for i, w := range want {
		if g := strings.Join(got[i], " "); g != w {
			t.Errorf("%s: line %d is %q, want %q\n%s", what, i+1, g, w, out)
		}
	}
}

func TestGroupsDescribeOffsetsWithAndWithoutADataPlane(t *testing.T) {
	f := newGroupsFixture(t)
	f.commit(t, "g", map[int32]int64{0: 4, 1: 5, 2: 3})

	out, diag, err := f.groups(t, "describe", "--group", "g")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diag, "Consumer group 'g' has no active members.") {
		t.Errorf("stderr %q lacks Kafka's no-active-members line", diag)
	}
	wantRows(t, "without a data plane", out,
		"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID",
		"g t 0 4 - - - - -",
		"g t 1 5 - - - - -",
		"g t 2 3 - - - - -")
	// Kafka's columns: GROUP and TOPIC at least 15 wide, PARTITION 10.
	if line := strings.Split(strings.TrimLeft(out, "\n"), "\n")[1]; !strings.HasPrefix(line, "g               t               0          4  ") {
		t.Errorf("row %q is not in kafka-consumer-groups.sh's columns", line)
	}

	out, _, err = f.groups(t, "describe", "--group", "g", "--data-plane", f.dataPlane)
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "with a data plane", out,
		"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID",
		"g t 0 4 10 6 - - -",
		"g t 1 5 5 0 - - -",
		"g t 2 3 0 -3 - - -") // committed past the log end: Kafka's getLag does not clamp

	out, _, err = f.groups(t, "describe", "--group", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Error: Consumer group 'nope' does not exist.") {
		t.Errorf("describing a group that does not exist printed %q", out)
	}
}

func TestGroupsListDescribeMembersAndDelete(t *testing.T) {
	f := newGroupsFixture(t)
	f.commit(t, "idle", map[int32]int64{0: 1})
	f.stableMember(t, "live", "member-1")

	out, _, err := f.groups(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "list", out, "idle", "live")
	out, _, err = f.groups(t, "list", "--state")
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "list --state", out, "GROUP STATE", "idle Empty", "live Stable")
	out, _, err = f.groups(t, "list", "--state", "stable")
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "list --state stable", out, "GROUP STATE", "live Stable")
	if _, _, err := f.groups(t, "list", "--state", "sleepy"); err == nil || !strings.Contains(err.Error(), "Stable") {
		t.Errorf("an unknown state: %v, want an error naming the states", err)
	}

	out, _, err = f.groups(t, "describe", "--group", "live", "--members", "--verbose")
	if err != nil {
		t.Fatal(err)
	}
	rs := rows(out)
	if len(rs) != 2 || strings.Join(rs[0], " ") != "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT" {
		t.Fatalf("members:\n%s", out)
	}
	if r := rs[1]; r[0] != "live" || r[3] != "member-1" || r[4] != "3" || r[6] != "t:0,1,2" {
		t.Errorf("member row %q, want group live, client member-1, 3 partitions, t:0,1,2", r)
	}
	out, _, err = f.groups(t, "describe", "--group", "live", "--state")
	if err != nil {
		t.Fatal(err)
	}
	if rs := rows(out); len(rs) != 2 || rs[1][0] != "live" || rs[1][len(rs[1])-2] != "Stable" || rs[1][len(rs[1])-1] != "1" {
		t.Errorf("state:\n%s", out)
	}
	out, _, err = f.groups(t, "describe", "--group", "live", "--data-plane", f.dataPlane)
	if err != nil {
		t.Fatal(err)
	}
	if rs := rows(out); len(rs) != 4 || rs[1][6] == "-" || rs[1][8] != "member-1" || rs[1][4] != "10" {
		t.Errorf("the live group's offsets name no member, or no end offset:\n%s", out)
	}

	out, _, err = f.groups(t, "delete", "--group", "live", "--group", "idle")
	if err == nil {
		t.Fatal("deleting a group with a member succeeded")
	}
	for _, want := range []string{"Error: Deletion of some consumer groups failed:", "* Group 'live' could not be deleted due to: NON_EMPTY_GROUP",
		"These consumer groups were deleted successfully: 'idle'"} {
		if !strings.Contains(out, want) {
			t.Errorf("delete output lacks %q:\n%s", want, out)
		}
	}
	if out, _, _ := f.groups(t, "list"); strings.Contains(out, "idle") {
		t.Errorf("idle still listed after its deletion:\n%s", out)
	}
}

func TestGroupsDeleteOffsets(t *testing.T) {
	f := newGroupsFixture(t)
	f.commit(t, "g", map[int32]int64{0: 4, 1: 5, 2: 6})
	out, _, err := f.groups(t, "delete-offsets", "--group", "g", "--topic", "t:1")
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "delete-offsets t:1", out, "Request succeeded for deleting offsets from group g.", "TOPIC PARTITION STATUS", "t 1 Successful")
	desc, _, _ := f.groups(t, "describe", "--group", "g")
	wantRows(t, "after deleting t:1", desc,
		"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID",
		"g t 0 4 - - - - -",
		"g t 2 6 - - - - -")

	out, _, err = f.groups(t, "delete-offsets", "--group", "g", "--topic", "t", "--topic", "missing")
	if err == nil {
		t.Fatal("deleting offsets of a topic that does not exist succeeded")
	}
	wantRows(t, "delete-offsets t missing", out, "Encountered some partition-level error, see the follow-up details.", "TOPIC PARTITION STATUS",
		"missing - Error: This server does not host this topic-partition.",
		"t 0 Successful", "t 1 Successful", "t 2 Successful")
}

// committedNow is group g's committed offsets of topic t, by partition.
func (f *groupsFixture) committedNow(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	offs, err := f.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for p, o := range offs["t"] {
		got[p] = o.At
	}
	return got
}

func TestGroupsResetOffsetsEveryScenario(t *testing.T) {
	f := newGroupsFixture(t) // the data plane: 10 records in t-0, 5 in t-1, none in t-2
	header := "GROUP TOPIC PARTITION NEW-OFFSET"
	for _, tc := range []struct {
		name string
		args []string
		want []string // rows after the header
	}{
		{"to-offset", []string{"--topic", "t", "--to-offset", "3"}, []string{"g t 0 3", "g t 1 3", "g t 2 3"}},
		{"to-offset within the data plane's offsets", []string{"--topic", "t", "--to-offset", "7", "--data-plane", "DP"}, []string{"g t 0 7", "g t 1 5", "g t 2 0"}},
		{"to-earliest", []string{"--topic", "t:0,1", "--to-earliest", "--data-plane", "DP"}, []string{"g t 0 0", "g t 1 0"}},
		{"to-latest", []string{"--all-topics", "--to-latest", "--data-plane", "DP"}, []string{"g t 0 10", "g t 1 5", "g t 2 0"}},
		{"to-current", []string{"--topic", "t:1", "--to-current"}, []string{"g t 1 5"}},
		{"shift-by", []string{"--topic", "t:0,1", "--shift-by", "-2"}, []string{"g t 0 2", "g t 1 3"}},
		{"shift-by within the data plane's offsets", []string{"--topic", "t:0,1", "--shift-by", "-5", "--data-plane", "DP"}, []string{"g t 0 0", "g t 1 0"}},
		{"to-datetime before every record", []string{"--topic", "t:0", "--to-datetime", "2000-01-01T00:00:00.000", "--data-plane", "DP"}, []string{"g t 0 0"}},
		{"to-datetime after every record", []string{"--topic", "t:0", "--to-datetime", time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z07:00"), "--data-plane", "DP"}, []string{"g t 0 10"}},
		{"by-duration", []string{"--topic", "t:0", "--by-duration", "P1DT2H", "--data-plane", "DP"}, []string{"g t 0 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.commit(t, "g", map[int32]int64{0: 4, 1: 5, 2: 6})
			args := append([]string{"reset-offsets", "--group", "g"}, tc.args...)
			for i, a := range args {
				if a == "DP" {
					args[i] = f.dataPlane
				}
			}
			out, _, err := f.groups(t, append(args, "--dry-run")...)
			if err != nil {
				t.Fatal(err)
			}
			wantRows(t, "dry run", out, append([]string{header}, tc.want...)...)
			if got := f.committedNow(t, "g"); got[0] != 4 || got[1] != 5 || got[2] != 6 {
				t.Fatalf("a dry run changed the offsets: %v", got)
			}
			out, _, err = f.groups(t, append(args, "--execute")...)
			if err != nil {
				t.Fatal(err)
			}
			wantRows(t, "execute", out, append([]string{header}, tc.want...)...)
			got := f.committedNow(t, "g")
			for _, row := range tc.want {
				fs := strings.Fields(row)
				p, _ := strconv.Atoi(fs[2])
				at, _ := strconv.ParseInt(fs[3], 10, 64)
				if got[int32(p)] != at {
					t.Errorf("after --execute t-%d is at %d, want %d", p, got[int32(p)], at)
				}
			}
		})
	}
}

func TestGroupsResetOffsetsExportsAndReadsBackAFile(t *testing.T) {
	f := newGroupsFixture(t)
	f.commit(t, "g", map[int32]int64{0: 4, 1: 5})
	out, diag, err := f.groups(t, "reset-offsets", "--group", "g", "--all-topics", "--shift-by", "1", "--export")
	if err != nil {
		t.Fatal(err)
	}
	if out != "t,0,5\nt,1,6\n" {
		t.Fatalf("--export wrote %q, want topic,partition,offset lines", out)
	}
	if diag != "" {
		t.Errorf("--export warned %q", diag)
	}
	file := filepath.Join(t.TempDir(), "offsets.csv")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.groups(t, "reset-offsets", "--group", "g", "--from-file", file, "--execute"); err != nil {
		t.Fatal(err)
	}
	if got := f.committedNow(t, "g"); got[0] != 5 || got[1] != 6 {
		t.Errorf("after --from-file: %v, want t-0 at 5 and t-1 at 6", got)
	}
}

func TestGroupsResetOffsetsRefusals(t *testing.T) {
	f := newGroupsFixture(t)
	f.commit(t, "g", map[int32]int64{0: 4})
	_, diag, err := f.groups(t, "reset-offsets", "--group", "g", "--topic", "t:0", "--to-offset", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diag, "WARN: No action will be performed as the --execute option is missing.") {
		t.Errorf("no warning without --dry-run or --execute: %q", diag)
	}
	if got := f.committedNow(t, "g"); got[0] != 4 {
		t.Errorf("a reset without --execute changed t-0 to %d", got[0])
	}
	// A partition the topic does not have fails the reset before anything
	// is committed.
	if _, _, err := f.groups(t, "reset-offsets", "--group", "g", "--topic", "t:0,7", "--to-offset", "1", "--execute"); err == nil ||
		!strings.Contains(err.Error(), `The partitions "t-7" do not exist`) {
		t.Errorf("a reset naming t-7: %v", err)
	}
	if got := f.committedNow(t, "g"); got[0] != 4 {
		t.Errorf("the refused reset changed t-0 to %d", got[0])
	}
	for _, args := range [][]string{
		{"--topic", "t", "--to-earliest"},                       // no data plane
		{"--topic", "t", "--to-offset", "1", "--shift-by", "1"}, // two scenarios
		{"--to-offset", "1"},                                    // no partitions
		{"--topic", "t", "--to-offset", "-1"},
		{"--topic", "t", "--by-duration", "1h", "--data-plane", f.dataPlane},
		{"--topic", "t", "--to-datetime", "yesterday", "--data-plane", f.dataPlane},
	} {
		if _, _, err := f.groups(t, append([]string{"reset-offsets", "--group", "g", "--dry-run"}, args...)...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}

	f.stableMember(t, "g", "member-1")
	out, _, err := f.groups(t, "reset-offsets", "--group", "g", "--topic", "t:0", "--to-offset", "1", "--execute")
	if err == nil {
		t.Fatal("reset the offsets of a group with a member")
	}
	if !strings.Contains(out, "Error: Assignments can only be reset if the group 'g' is inactive, but the current state is Stable.") {
		t.Errorf("refusal printed %q", out)
	}
	if got := f.committedNow(t, "g"); got[0] != 4 {
		t.Errorf("the refused reset changed t-0 to %d", got[0])
	}
}

// --to-current resets a partition with no committed offset to its log end,
// as Kafka's tool does; without a data plane to ask, it says so.
func TestGroupsResetToCurrentTakesTheLogEndWithoutACommit(t *testing.T) {
	f := newGroupsFixture(t) // the data plane: 10 records in t-0, 5 in t-1, none in t-2
	f.commit(t, "h", map[int32]int64{0: 4})
	out, _, err := f.groups(t, "reset-offsets", "--group", "h", "--topic", "t", "--to-current", "--data-plane", f.dataPlane, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "to-current", out, "GROUP TOPIC PARTITION NEW-OFFSET", "h t 0 4", "h t 1 5", "h t 2 0")
	_, _, err = f.groups(t, "reset-offsets", "--group", "h", "--topic", "t", "--to-current", "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "--data-plane") {
		t.Errorf("--to-current without a commit or a data plane: %v, want an error naming --data-plane", err)
	}
}
