package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// oddGroup is a group id that is not UTF-8 and holds a slash: its page and
// JSON must still find it.
const oddGroup = "ops/\xff\xfe"

// dotsGroup is a group id no path segment can carry: /group?id= does.
const dotsGroup = ".."

// statusFixture is a three-node cluster with a topic "orders" of 6
// partitions, a consumer group "billing" of two franz-go members that
// committed an offset for every partition, an Empty group "reports" with
// offsets only, and oddGroup. web[i] serves node i's HTTP endpoints as
// kcoord serve composes them.
type statusFixture struct {
	servers []*Server
	web     []*httptest.Server
	members []*kgo.Client
}

func startStatusFixture(t *testing.T) *statusFixture {
	t.Helper()
	f := &statusFixture{servers: StartTestCluster(t, 3, nil)}
	// Every node leads some shards, so every view crosses nodes.
	waitBalanced(t, f.servers, 30*time.Second)
	for _, s := range f.servers {
		web := httptest.NewServer(s.HTTPHandler(prometheus.NewRegistry()))
		t.Cleanup(web.Close)
		f.web = append(f.web, web)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seeds := kgo.SeedBrokers(f.servers[0].KafkaAddr().String())
	admin, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	adm := kadm.NewClient(admin)
	if resp, err := adm.CreateTopic(ctx, 6, 1, nil, "orders"); err != nil || resp.Err != nil {
		t.Fatalf("create orders: %v %v", err, resp.Err)
	}
	for i := range 2 {
		m, err := kgo.NewClient(seeds, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
			kgo.ClientID(fmt.Sprintf("billing-%d", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		go func() {
			for ctx.Err() == nil && !m.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
		f.members = append(f.members, m)
	}
	waitFor(t, 30*time.Second, "billing Stable with both members", func() bool {
		d, err := adm.DescribeGroups(ctx, "billing")
		return err == nil && d["billing"].State == "Stable" && len(d["billing"].Members) == 2
	})
	offsets := map[string]map[int32]kgo.EpochOffset{"orders": {}}
	for p := range int32(6) {
		offsets["orders"][p] = kgo.EpochOffset{Epoch: -1, Offset: 100 + int64(p)}
	}
	var commitErr error
	f.members[0].CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && commitErr == nil {
					commitErr = fmt.Errorf("partition %d: error code %d", p.Partition, p.ErrorCode)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("billing commit: %v", commitErr)
	}
	for _, g := range []string{"reports", oddGroup, dotsGroup} {
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, g, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %q: %v", g, err)
		}
	}
	return f
}

// getJSON GETs path from web into v and returns the status code.
func getJSON(t *testing.T, web *httptest.Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(web.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %q", path, err, body)
	}
	return resp.StatusCode
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Every node's /v1/groups lists every group, each from the node that
// coordinates it, with what a person looks for: state, members,
// generation, protocol, last rebalance.
func TestStatusAPIListsEveryGroupFromAnyNode(t *testing.T) {
	f := startStatusFixture(t)
	for i, web := range f.web {
		var v GroupsView
		if code := getJSON(t, web, "/v1/groups", &v); code != http.StatusOK {
			t.Fatalf("node %d: /v1/groups answered %d", i+1, code)
		}
		if len(v.UnreportedShards) > 0 || len(v.Errors) > 0 {
			t.Errorf("node %d: unreported shards %v, errors %v", i+1, v.UnreportedShards, v.Errors)
		}
		byID := map[string]GroupSummary{}
		for _, g := range v.Groups {
			byID[g.ID()] = g
		}
		b, ok := byID["billing"]
		if !ok || b.State != "Stable" || b.Members != 2 || b.Generation < 1 || b.ProtocolType != "consumer" || b.Protocol == "" || b.LastRebalance == nil {
			t.Errorf("node %d: billing %+v (found %v)", i+1, b, ok)
		}
		if want := f.servers[0].ShardFor("billing"); b.Shard != want {
			t.Errorf("node %d: billing on shard %d, want %d", i+1, b.Shard, want)
		}
		if r, ok := byID["reports"]; !ok || r.State != "Empty" || r.Members != 0 {
			t.Errorf("node %d: reports %+v (found %v)", i+1, r, ok)
		}
		if o, ok := byID[oddGroup]; !ok || o.GroupBase64 == nil {
			t.Errorf("node %d: %q %+v (found %v), want it with its exact bytes", i+1, oddGroup, o, ok)
		}
	}
}

// A group's JSON names its members, their assignments (decoded from the
// consumer protocol) and its committed offsets, asked of any node.
func TestStatusAPIDescribesAGroupFromAnyNode(t *testing.T) {
	f := startStatusFixture(t)
	for i, web := range f.web {
		var d GroupDetail
		if code := getJSON(t, web, "/v1/groups/billing", &d); code != http.StatusOK {
			t.Fatalf("node %d: /v1/groups/billing answered %d", i+1, code)
		}
		var assigned []int32
		var clients []string
		for _, m := range d.MemberList {
			clients = append(clients, m.ClientID)
			if !slices.Equal(m.Subscription, []string{"orders"}) {
				t.Errorf("node %d: member %s subscribes %v", i+1, m.MemberID, m.Subscription)
			}
			for _, a := range m.Assignment {
				if a.Topic == "orders" {
					assigned = append(assigned, a.Partitions...)
				}
			}
		}
		slices.Sort(assigned)
		slices.Sort(clients)
		if !slices.Equal(assigned, []int32{0, 1, 2, 3, 4, 5}) || !slices.Equal(clients, []string{"billing-1", "billing-2"}) {
			t.Errorf("node %d: members %v assigned %v, want billing-1 and billing-2 sharing orders 0-5", i+1, clients, assigned)
		}
		if d.Leader == "" || len(d.Offsets) != 6 || d.Offsets[5].Offset != 105 || d.Offsets[5].CommittedAt.IsZero() {
			t.Errorf("node %d: leader %q offsets %+v", i+1, d.Leader, d.Offsets)
		}
		var odd GroupDetail
		if code := getJSON(t, web, "/v1/groups/"+url.PathEscape(oddGroup), &odd); code != http.StatusOK || odd.ID() != oddGroup || len(odd.Offsets) != 1 {
			t.Errorf("node %d: %q answered %d: %+v", i+1, oddGroup, code, odd)
		}
		var dots GroupDetail
		if code := getJSON(t, web, "/v1/group?id="+url.QueryEscape(dotsGroup), &dots); code != http.StatusOK || dots.ID() != dotsGroup {
			t.Errorf("node %d: %q answered %d: %+v", i+1, dotsGroup, code, dots)
		}
		var e adminError
		if code := getJSON(t, web, "/v1/groups/nobody", &e); code != http.StatusNotFound || e.Error == "" {
			t.Errorf("node %d: unknown group answered %d %+v, want 404 with a message", i+1, code, e)
		}
	}
}

// The timeline merges every node's events: the leaderships each node
// gained and billing's rebalance.
func TestStatusAPITimelineMergesEveryNode(t *testing.T) {
	f := startStatusFixture(t)
	var v TimelineView
	if code := getJSON(t, f.web[1], fmt.Sprintf("/v1/timeline?limit=%d", maxTimelineLimit), &v); code != http.StatusOK {
		t.Fatalf("/v1/timeline answered %d", code)
	}
	gained := map[int32]bool{}
	rebalanced := false
	for i, e := range v.Events {
		if i > 0 && e.At.After(v.Events[i-1].At) {
			t.Fatalf("event %d (%v) is newer than event %d (%v): not newest first", i, e.At, i-1, v.Events[i-1].At)
		}
		switch {
		case e.Kind == eventLeaderGained:
			gained[e.Node] = true
		case e.Kind == eventRebalance && e.Group == "billing" && e.Members == 2:
			rebalanced = true
		}
	}
	if len(gained) != 3 || !rebalanced {
		t.Errorf("leaderships gained by nodes %v, billing's two-member rebalance seen: %v; events: %+v", gained, rebalanced, v.Events)
	}
	var only TimelineView
	getJSON(t, f.web[2], "/v1/timeline?group=billing", &only)
	if len(only.Events) == 0 {
		t.Error("?group=billing kept no event")
	}
	for _, e := range only.Events {
		if e.Kind != eventRebalance || e.Group != "billing" {
			t.Errorf("?group=billing kept %+v", e)
		}
	}
	var e adminError
	if code := getJSON(t, f.web[0], "/v1/timeline?limit=0", &e); code != http.StatusBadRequest {
		t.Errorf("limit=0 answered %d, want 400", code)
	}
}

// With a node killed, the surviving nodes' views still list every group
// once its shards have new leaders, and the page says which node is down.
func TestStatusAfterANodeDies(t *testing.T) {
	f := startStatusFixture(t)
	_ = f.servers[2].Kill()
	waitFor(t, 30*time.Second, "every group listed again by node 1", func() bool {
		var v GroupsView
		getJSON(t, f.web[0], "/v1/groups", &v)
		names := map[string]bool{}
		for _, g := range v.Groups {
			names[g.ID()] = true
		}
		return len(v.UnreportedShards) == 0 && names["billing"] && names["reports"] && names[oddGroup]
	})
	waitFor(t, 30*time.Second, "node 3 shown dead or suspect", func() bool {
		resp, err := http.Get(f.web[1].URL + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK &&
			(strings.Contains(string(body), "Node 3 is dead.") || strings.Contains(string(body), "Node 3 is suspect."))
	})
	var d GroupDetail
	waitFor(t, 30*time.Second, "billing's detail from its new coordinator", func() bool {
		return getJSON(t, f.web[1], "/v1/groups/billing", &d) == http.StatusOK && len(d.Offsets) == 6
	})
}

// Every page renders from any node, without a browser: the cluster page,
// a group's (any id, through ?id=), and the answers for a group that does
// not exist and for no group named.
func TestStatusPagesRender(t *testing.T) {
	f := startStatusFixture(t)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/", http.StatusOK, `href="/group?id=billing"`},
		{"/group?id=billing", http.StatusOK, "billing-2"},
		{"/group?id=" + url.QueryEscape(oddGroup), http.StatusOK, `class="offset"`},
		{"/group?id=" + url.QueryEscape(dotsGroup), http.StatusOK, `class="offset"`},
		{"/group?id=nobody", http.StatusNotFound, "does not exist"},
		{"/group", http.StatusBadRequest, "Name the group"},
	} {
		for i, web := range f.web {
			resp, err := http.Get(web.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
				t.Errorf("node %d: GET %s answered %d without %q (want %d):\n%s", i+1, tc.path, resp.StatusCode, tc.want, tc.code, body)
			}
		}
	}
}
