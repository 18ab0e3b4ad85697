package api

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
)

// Handler tests without a server: one shard over a groups.MemLog, and a
// topic registry in memory whose writes can be made to fail.

type fakeCluster struct{}

var testBroker = Broker{NodeID: 1, KafkaAddr: "127.0.0.1:9092"}

func (fakeCluster) Brokers() []Broker             { return []Broker{testBroker} }
func (fakeCluster) LeaderOf(int32) (Broker, bool) { return testBroker, true }
func (fakeCluster) AwaitLeaderOf(context.Context, int32) (Broker, bool) {
	return testBroker, true
}
func (fakeCluster) Controller() (Broker, bool) { return testBroker, true }
func (fakeCluster) ClusterID() string          { return "6f1d2c1e-0000-4000-8000-000000000001" }

// memTopics is a topic registry in memory; writeErr, when set, fails every
// Create and Delete as a Raft write would.
type memTopics struct {
	mu       sync.Mutex
	topics   map[string]fsm.Topic
	version  uint64
	writeErr error
}

// TopicsVersion implements groups.TopicSource.
func (m *memTopics) TopicsVersion() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version
}

func newMemTopics(ts ...fsm.Topic) *memTopics {
	m := &memTopics{topics: map[string]fsm.Topic{}}
	for _, t := range ts {
		m.topics[t.Name] = t
	}
	return m
}

func (m *memTopics) Topics() []fsm.Topic {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]fsm.Topic, 0, len(m.topics))
	for _, t := range m.topics {
		out = append(out, t)
	}
	return out
}

func (m *memTopics) Topic(name string) (fsm.Topic, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.topics[name]
	return t, ok
}

func (m *memTopics) Create(_ context.Context, t fsm.Topic) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writeErr != nil {
		return m.writeErr
	}
	if _, ok := m.topics[t.Name]; ok {
		return fsm.ErrTopicExists
	}
	m.topics[t.Name] = t
	m.version++
	return nil
}

func (m *memTopics) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writeErr != nil {
		return m.writeErr
	}
	if _, ok := m.topics[name]; !ok {
		return fsm.ErrTopicNotFound
	}
	delete(m.topics, name)
	m.version++
	return nil
}

// newTestHandlers returns handlers over topics and one active shard.
func newTestHandlers(t *testing.T, cfg Config, topics Topics) *Handlers {
	t.Helper()
	gcfg := groups.DefaultConfig()
	gcfg.InitialRebalanceDelay = 0
	if src, ok := topics.(groups.TopicSource); ok {
		gcfg.Topics = src
	}
	if cfg.Authorizer != nil {
		gcfg.AuthorizeTopic = TopicAuthorizer(cfg.Authorizer)
	}
	log := groups.NewMemLog()
	c, err := groups.NewCoordinator(gcfg, 0, log, log.FSM)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Activate(log.Epoch()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Deactivate)
	return New(cfg, fakeCluster{}, topics, []Shard{{Coordinator: c}})
}

func createReq(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly, req.TimeoutMillis = 7, validateOnly, 5000
	req.Topics = topics
	return req
}

func newTopic(name string, partitions int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	return rt
}

func createTopics(t *testing.T, h *Handlers, req *kmsg.CreateTopicsRequest) []kmsg.CreateTopicsResponseTopic {
	t.Helper()
	resp, err := h.createTopics(context.Background(), nil, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.CreateTopicsResponse).Topics
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if want == nil && got != 0 || want != nil && got != want.Code {
		t.Errorf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func TestCreateTopicsRefusesMorePartitionsThanTheTopicLimit(t *testing.T) {
	topics := newMemTopics()
	h := newTestHandlers(t, Config{MaxPartitionsPerTopic: 8}, topics)
	assigned := kmsg.NewCreateTopicsRequestTopic()
	assigned.Topic, assigned.NumPartitions, assigned.ReplicationFactor = "assigned", -1, -1
	for p := int32(0); p < 9; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		assigned.ReplicaAssignment = append(assigned.ReplicaAssignment, a)
	}
	got := createTopics(t, h, createReq(false,
		newTopic("at-limit", 8), newTopic("over", 9), newTopic("max", math.MaxInt32),
		newTopic("default", -1), newTopic("zero", 0), newTopic("minus-two", -2), assigned))
	for i, want := range []*kerr.Error{nil, kerr.InvalidPartitions, kerr.InvalidPartitions, nil, kerr.InvalidPartitions, kerr.InvalidPartitions, kerr.InvalidPartitions} {
		wantCode(t, got[i].Topic, got[i].ErrorCode, want)
	}
	for _, i := range []int{1, 2, 6} {
		if msg := got[i].ErrorMessage; msg == nil || !strings.Contains(*msg, "kcoord.max.partitions.per.topic") || !strings.Contains(*msg, "(8)") {
			t.Errorf("%s: message %v does not name the limit and its value", got[i].Topic, msg)
		}
	}
	if got[3].NumPartitions != defaultPartitions {
		t.Errorf("-1 partitions: %d, want the default %d", got[3].NumPartitions, defaultPartitions)
	}
	if _, ok := topics.Topic("over"); ok {
		t.Error("a refused topic was registered")
	}
}

func TestCreateTopicsRefusesTopicsBeyondTheRegistryLimits(t *testing.T) {
	for _, validateOnly := range []bool{false, true} {
		name := map[bool]string{false: "create", true: "validate-only"}[validateOnly]
		t.Run(name, func(t *testing.T) {
			topics := newMemTopics(fsm.Topic{Name: "old", Partitions: 4, ReplicationFactor: 1})
			h := newTestHandlers(t, Config{MaxTopics: 3, MaxPartitions: 10}, topics)
			// 4 registered + 3 = 7; + 4 = 11 > 10; + 2 = 9; a fourth topic > 3.
			got := createTopics(t, h, createReq(validateOnly,
				newTopic("a", 3), newTopic("b", 4), newTopic("c", 2), newTopic("d", 1)))
			for i, want := range []*kerr.Error{nil, kerr.PolicyViolation, nil, kerr.PolicyViolation} {
				wantCode(t, got[i].Topic, got[i].ErrorCode, want)
			}
			for i, limit := range map[int]string{1: "kcoord.max.partitions (10)", 3: "kcoord.max.topics (3)"} {
				if msg := got[i].ErrorMessage; msg == nil || !strings.Contains(*msg, limit) {
					t.Errorf("%s: message %v does not name %s", got[i].Topic, msg, limit)
				}
			}
			wantRegistered := 3
			if validateOnly {
				wantRegistered = 1
			}
			if n := len(topics.Topics()); n != wantRegistered {
				t.Errorf("%d topics registered, want %d", n, wantRegistered)
			}
		})
	}
}

func TestCreateTopicsAnswersAnExistingTopicBeforeItsSettings(t *testing.T) {
	h := newTestHandlers(t, Config{}, newMemTopics(fsm.Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}))
	for _, validateOnly := range []bool{false, true} {
		got := createTopics(t, h, createReq(validateOnly, newTopic("t", 0)))
		wantCode(t, "existing topic", got[0].ErrorCode, kerr.TopicAlreadyExists)
	}
}

func TestTopicWriteFailuresAreRequestTimedOutOrNotController(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want *kerr.Error
	}{
		{ErrApplyTimeout, kerr.RequestTimedOut},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{ErrNotLeader, kerr.NotController},
		{&Translated{Sentinel: ErrNotLeader, Cause: raft.ErrLeadershipLost, Err: raft.ErrLeadershipLost}, kerr.NotController},
	} {
		t.Run(tt.err.Error(), func(t *testing.T) {
			topics := newMemTopics(fsm.Topic{Name: "old", Partitions: 1, ReplicationFactor: 1})
			topics.writeErr = tt.err
			h := newTestHandlers(t, Config{}, topics)
			got := createTopics(t, h, createReq(false, newTopic("new", 1)))
			wantCode(t, "CreateTopics", got[0].ErrorCode, tt.want)

			del := kmsg.NewPtrDeleteTopicsRequest()
			del.Version, del.TopicNames = 5, []string{"old"}
			resp, err := h.deleteTopics(context.Background(), nil, del)
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, "DeleteTopics", resp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode, tt.want)
		})
	}
}

func metadataOf(t *testing.T, h *Handlers, names ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, n := range names {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, mt)
	}
	done := make(chan *kmsg.MetadataResponse, 1)
	go func() {
		resp, err := h.metadata(context.Background(), nil, req)
		if err != nil {
			t.Error(err)
		}
		done <- resp.(*kmsg.MetadataResponse)
	}()
	select {
	case resp := <-done:
		return resp
	case <-time.After(10 * time.Second):
		t.Fatal("Metadata did not answer")
		return nil
	}
}

// A topic registered with more partitions than the limit (by a kcoord
// without it, or before it was lowered) is answered at once, with an
// error and no partitions.
// leaderlessCluster knows no shard's leader: the metadata group is
// electing.
type leaderlessCluster struct{ fakeCluster }

func (leaderlessCluster) LeaderOf(int32) (Broker, bool) { return Broker{}, false }
func (leaderlessCluster) Controller() (Broker, bool)    { return Broker{}, false }
func (leaderlessCluster) AwaitLeaderOf(ctx context.Context, _ int32) (Broker, bool) {
	<-ctx.Done()
	return Broker{}, false
}

// Metadata names a live controller, as a KRaft broker does: the metadata
// leader, or while none is known this node, which forwards CreateTopics
// and DeleteTopics. -1 made admin clients give up on creating topics.
func TestMetadataNamesALiveController(t *testing.T) {
	h := newTestHandlers(t, Config{NodeID: 7}, newMemTopics())
	if got := metadataOf(t, h).ControllerID; got != testBroker.NodeID {
		t.Errorf("controller %d with a metadata leader, want the leader, %d", got, testBroker.NodeID)
	}
	h.cluster = leaderlessCluster{}
	if got := metadataOf(t, h).ControllerID; got != 7 {
		t.Errorf("controller %d without a metadata leader, want this node, 7", got)
	}
}

func TestMetadataAnswersATopicBeyondThePartitionLimitWithoutItsPartitions(t *testing.T) {
	topics := newMemTopics(
		fsm.Topic{Name: "big", Partitions: 9, ReplicationFactor: 1},
		fsm.Topic{Name: "ok", Partitions: 8, ReplicationFactor: 1},
	)
	h := newTestHandlers(t, Config{MaxPartitionsPerTopic: 8}, topics)
	for _, names := range [][]string{{"big", "ok"}, nil} {
		resp := metadataOf(t, h, names...)
		if len(resp.Topics) != 2 {
			t.Fatalf("topics %+v", resp.Topics)
		}
		for _, mt := range resp.Topics {
			switch *mt.Topic {
			case "big":
				wantCode(t, "big", mt.ErrorCode, kerr.InvalidPartitions)
				if len(mt.Partitions) != 0 {
					t.Errorf("big: %d partitions described", len(mt.Partitions))
				}
			case "ok":
				wantCode(t, "ok", mt.ErrorCode, nil)
				if len(mt.Partitions) != 8 {
					t.Errorf("ok: %d partitions, want 8", len(mt.Partitions))
				}
			}
		}
	}
}

func commitReq(group string, parts ...[2]any) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	for _, tp := range parts {
		topic, partition := tp[0].(string), int32(tp[1].(int))
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, 7
		i := -1
		for j := range req.Topics {
			if req.Topics[j].Topic == topic {
				i = j
			}
		}
		if i < 0 {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// commitCodes sends an OffsetCommit and returns "topic/partition" → code.
func commitCodes(t *testing.T, h *Handlers, req *kmsg.OffsetCommitRequest) map[string]int16 {
	t.Helper()
	resp, err := h.offsetCommit(context.Background(), nil, req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int16{}
	for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, rp := range rt.Partitions {
			out[rt.Topic+"/"+strconv.Itoa(int(rp.Partition))] = rp.ErrorCode
		}
	}
	return out
}

func TestOffsetCommitToUnregisteredTopicsIsOptIn(t *testing.T) {
	registered := fsm.Topic{Name: "t", Partitions: 2, ReplicationFactor: 1}
	off := newTestHandlers(t, Config{}, newMemTopics(registered))
	got := commitCodes(t, off, commitReq("g", [2]any{"elsewhere", 0}, [2]any{"t", 1}, [2]any{"t", 2}))
	wantCode(t, "unregistered topic", got["elsewhere/0"], kerr.UnknownTopicOrPartition)
	wantCode(t, "registered partition", got["t/1"], nil)
	wantCode(t, "partition beyond the count", got["t/2"], kerr.UnknownTopicOrPartition)

	on := newTestHandlers(t, Config{CommitUnregisteredTopics: true}, newMemTopics(registered))
	got = commitCodes(t, on, commitReq("g", [2]any{"elsewhere", 0}, [2]any{"t", 1}, [2]any{"t", 2}))
	wantCode(t, "unregistered topic, opted in", got["elsewhere/0"], nil)
	wantCode(t, "registered partition, opted in", got["t/1"], nil)
	wantCode(t, "registered topic's partition beyond the count, opted in", got["t/2"], kerr.UnknownTopicOrPartition)
}

func TestOffsetCommitOfOnlyUnknownPartitionsCreatesNoGroup(t *testing.T) {
	h := newTestHandlers(t, Config{}, newMemTopics(fsm.Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}))
	got := commitCodes(t, h, commitReq("g", [2]any{"nope", 0}, [2]any{"t", 1}))
	wantCode(t, "nope/0", got["nope/0"], kerr.UnknownTopicOrPartition)
	wantCode(t, "t/1", got["t/1"], kerr.UnknownTopicOrPartition)
	if d, err := h.shards[0].Coordinator.Describe(context.Background(), "g"); err != nil || d.Exists {
		t.Fatalf("the group was created: %+v, %v", d, err)
	}
	// The empty group id is a group like any other for OffsetCommit (Kafka
	// 4.x GroupCoordinatorService.commitOffsets); partitions refused as
	// unknown keep that answer.
	got = commitCodes(t, h, commitReq("", [2]any{"nope", 0}))
	wantCode(t, "empty group, unknown topic", got["nope/0"], kerr.UnknownTopicOrPartition)
	got = commitCodes(t, h, commitReq("", [2]any{"nope", 0}, [2]any{"t", 0}))
	wantCode(t, "empty group, unknown topic", got["nope/0"], kerr.UnknownTopicOrPartition)
	wantCode(t, "empty group, known topic", got["t/0"], nil)
}

// Offsets of a topic that was deleted can still be deleted: kcoord does not
// drop them with the topic, as Kafka does, so OffsetDelete is the way to.
// A topic the group holds nothing of stays UNKNOWN_TOPIC_OR_PARTITION.
func TestOffsetDeleteRemovesOffsetsOfADeletedTopic(t *testing.T) {
	topics := newMemTopics(fsm.Topic{Name: "gone", Partitions: 2, ReplicationFactor: 1})
	h := newTestHandlers(t, Config{}, topics)
	if got := commitCodes(t, h, commitReq("g", [2]any{"gone", 0})); got["gone/0"] != 0 {
		t.Fatalf("commit: %v", got)
	}
	if err := topics.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	for _, name := range []string{"gone", "never"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = name
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := h.offsetDelete(context.Background(), nil, req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.OffsetDeleteResponse)
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("answer %+v, want gone/0 deleted and never/0 UNKNOWN_TOPIC_OR_PARTITION", r)
	}
	if h.shardFor("g").Coordinator.HasOffset("g", fsm.TopicPartition{Topic: "gone"}) {
		t.Error("the deleted topic's offset is still stored")
	}
}
