package api

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

// Broker is a node as clients see it.
type Broker struct {
	NodeID    int32
	KafkaAddr string // host:port, as advertised
}

// Cluster is the node's view of the cluster the handlers need: who leads
// what (the handlers map group ids to shards themselves,
// groups.PartitionFor). The server adapts cluster.Node to it. Its methods are called from handler goroutines and must not
// block, but AwaitLeaderOf.
type Cluster interface {
	Brokers() []Broker
	LeaderOf(shard int32) (Broker, bool)
	// AwaitLeaderOf is LeaderOf, waiting until ctx ends for a leader
	// this node does not know yet.
	AwaitLeaderOf(ctx context.Context, shard int32) (Broker, bool)
	// Controller is the metadata group's leader, which Metadata reports as
	// Kafka's controller.
	Controller() (Broker, bool)
	// ClusterID is the cluster's id, "" before bootstrap agreed on one.
	ClusterID() string
}

// TopicReader reads the topic registry from this node's replica of the
// metadata group: *fsm.MetaFSM itself, on a node. Its methods never block.
type TopicReader interface {
	// Topics lists every registered topic, sorted by name.
	Topics() []fsm.Topic
	// Topic returns one registered topic.
	Topic(name string) (fsm.Topic, bool)
}

// Topics is the topic registry in the metadata Raft group.
type Topics interface {
	TopicReader
	// Create and Delete write through the metadata group and wait for the
	// commit; they return fsm.ErrTopicExists / fsm.ErrTopicNotFound, or
	// ErrNotLeader on a node that is not the controller.
	Create(ctx context.Context, t fsm.Topic) error
	Delete(ctx context.Context, name string) error
}

// Credentials is the SCRAM credential store in the metadata Raft group.
type Credentials interface {
	// ScramCredentials lists every stored credential, sorted by user,
	// then mechanism.
	ScramCredentials() []fsm.ScramCredential
	// SetScram and DeleteScram write through the metadata group and wait
	// for the commit (forwarded to its leader from other nodes);
	// DeleteScram returns fsm.ErrScramCredentialNotFound for a credential
	// that does not exist, and both ErrNotLeader when no leader is
	// reachable.
	SetScram(ctx context.Context, c fsm.ScramCredential) error
	DeleteScram(ctx context.Context, user string, mechanism int8) error
}

// ACLStore is the ACLs in the metadata Raft group.
type ACLStore interface {
	// ACLs is every stored ACL, as this node's replica has them.
	ACLs() *auth.ACLs
	// SyncedACLs is ACLs once this replica holds every change the
	// metadata leader had applied (cluster.Node.SyncMetadata), so that
	// DeleteAcls matches what was created just before, through any node.
	SyncedACLs(ctx context.Context) (*auth.ACLs, error)
	// CreateACLs and DeleteACLs write through the metadata group (from
	// other nodes, forwarded to its leader) and wait for the commit;
	// creating an ACL that exists, or deleting one that does not,
	// changes nothing.
	CreateACLs(ctx context.Context, acls []auth.ACL) error
	DeleteACLs(ctx context.Context, acls []auth.ACL) error
}

// Shard is what the handlers use of one group shard on this node.
type Shard struct {
	Coordinator *groups.Coordinator
}

// Config holds the broker settings the handlers enforce.
type Config struct {
	// NodeID is this broker's id.
	NodeID int32
	// MaxFetchWait caps a Fetch's MaxWaitMillis, so an idle consumer's
	// connection answers at least this often.
	MaxFetchWait time.Duration
	// MaxPartitionsPerTopic is kcoord.max.partitions.per.topic: the most
	// partitions CreateTopics gives one topic (more is INVALID_PARTITIONS),
	// and the most Metadata describes (a registered topic with more, from
	// an older kcoord or a lowered limit, is answered INVALID_PARTITIONS
	// without partitions). 0 means DefaultMaxPartitionsPerTopic.
	MaxPartitionsPerTopic int32
	// MaxTopics is kcoord.max.topics: the most topics the registry holds; a
	// CreateTopics beyond it is POLICY_VIOLATION. 0 means DefaultMaxTopics.
	MaxTopics int32
	// MaxPartitions is kcoord.max.partitions: the most partitions of all
	// registered topics together; a CreateTopics beyond it is
	// POLICY_VIOLATION. 0 means DefaultMaxPartitions.
	MaxPartitions int32
	// CommitUnregisteredTopics is
	// kcoord.offsets.commit.unregistered.topics.enable: OffsetCommit takes
	// offsets of topics the registry does not hold (for data planes whose
	// topics kcoord does not own). When false, as in Kafka, their partitions
	// are UNKNOWN_TOPIC_OR_PARTITION. A registered topic's partitions beyond
	// its count are unknown either way.
	CommitUnregisteredTopics bool
	// ElectionHold is kcoord.group.election.hold.ms: how long a
	// FindCoordinator waits for a leader of a group's shard that this node
	// does not know yet (an election under way) before it answers
	// COORDINATOR_NOT_AVAILABLE. 0 answers at once.
	ElectionHold time.Duration
	// Metadata is the node's replica of the metadata group as handlers
	// consult it before answering a miss (metareplica.go); nil answers
	// misses from the local state alone (tests).
	Metadata MetadataReplica
	// Authorizer decides each request by its principal (authorize.go);
	// nil, on a node that does not authenticate its clients, allows
	// everything, as Kafka without an authorizer.
	Authorizer Authorizer
	// Registry is where the handlers read the topic registry: the node's
	// metadata replica, so a read goes to the FSM without a hop through
	// the server. nil reads through the Topics store (tests).
	Registry TopicReader
	// BootstrapSuperuser is --sasl-superuser, whose password is the
	// node's own; AlterUserScramCredentials refuses to alter it. "" for
	// none.
	BootstrapSuperuser string
	// Logger gets handler logs; nil discards them.
	Logger hclog.Logger
}

// Defaults of the limits in Config.
const (
	DefaultMaxPartitionsPerTopic = 4096
	DefaultMaxTopics             = 10000
	DefaultMaxPartitions         = 100000
)

// Handlers serves the Kafka APIs of one node. Its methods run on the
// transport's per-connection handler goroutines, concurrently.
type Handlers struct {
	cfg     Config
	cluster Cluster
	topics  Topics
	// registry is cfg.Registry, or topics when that is nil.
	registry TopicReader
	// credentials is nil on nodes wired without SCRAM storage (tests):
	// the SCRAM APIs are then not registered.
	credentials Credentials
	// acls is nil on nodes wired without ACL storage (tests): the ACL
	// APIs are then not registered.
	acls ACLStore
	// features is nil on nodes wired without it (tests): UpdateFeatures
	// is then not registered.
	features FeatureStore
	shards   []Shard
	logger   hclog.Logger
	// createMu serialises CreateTopics, so the registry's limits are
	// checked and taken atomically on the controller.
	createMu sync.Mutex
}

// New returns handlers over shards (indexed by shard id).
func New(cfg Config, c Cluster, topics Topics, shards []Shard) *Handlers {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg.MaxFetchWait <= 0 {
		cfg.MaxFetchWait = 30 * time.Second
	}
	if cfg.MaxPartitionsPerTopic <= 0 {
		cfg.MaxPartitionsPerTopic = DefaultMaxPartitionsPerTopic
	}
	if cfg.MaxTopics <= 0 {
		cfg.MaxTopics = DefaultMaxTopics
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	registry := cfg.Registry
	if registry == nil {
		registry = topics
	}
	return &Handlers{cfg: cfg, cluster: c, topics: topics, registry: registry, shards: shards, logger: logger}
}

// Register adds every API kcoord serves, with its version range, to mux.
func (h *Handlers) Register(mux *transport.Mux) { h.registerAll(mux, false) }

// registerAll registers every API; the optional ones (SCRAM, ACLs) when
// their stores are set, or all of them with everything (Versions' table).
func (h *Handlers) registerAll(mux *transport.Mux, everything bool) {
	reg := func(req kmsg.Request, min, max int16, fn func(context.Context, *transport.RequestContext, kmsg.Request) (kmsg.Response, error)) {
		mux.Handle(req.Key(), min, max, func(ctx context.Context, rc *transport.RequestContext, req kmsg.Request) (kmsg.Response, error) {
			if err := h.freshForAuthorization(ctx); err != nil {
				return nil, err
			}
			return fn(ctx, rc, req)
		})
	}
	reg(new(kmsg.MetadataRequest), 0, 13, h.metadata)
	reg(new(kmsg.FindCoordinatorRequest), 0, 6, h.findCoordinator)
	reg(new(kmsg.JoinGroupRequest), 0, 9, h.joinGroup)
	reg(new(kmsg.SyncGroupRequest), 0, 5, h.syncGroup)
	reg(new(kmsg.HeartbeatRequest), 0, 4, h.heartbeat)
	reg(new(kmsg.LeaveGroupRequest), 0, 5, h.leaveGroup)
	reg(new(kmsg.OffsetCommitRequest), 0, 9, h.offsetCommit)
	reg(new(kmsg.OffsetFetchRequest), 0, 9, h.offsetFetch)
	reg(new(kmsg.DescribeGroupsRequest), 0, 6, h.describeGroups)
	reg(new(kmsg.ListGroupsRequest), 0, 5, h.listGroups)
	reg(new(kmsg.DeleteGroupsRequest), 0, 2, h.deleteGroups)
	reg(new(kmsg.OffsetDeleteRequest), 0, 0, h.offsetDelete)
	reg(new(kmsg.CreateTopicsRequest), 0, 7, h.createTopics)
	reg(new(kmsg.DeleteTopicsRequest), 0, 6, h.deleteTopics)
	reg(new(kmsg.ListOffsetsRequest), 0, 10, h.listOffsets)
	reg(new(kmsg.FetchRequest), 0, 12, h.fetch)
	reg(new(kmsg.ConsumerGroupHeartbeatRequest), 0, 1, h.consumerGroupHeartbeat)
	reg(new(kmsg.ConsumerGroupDescribeRequest), 0, 1, h.consumerGroupDescribe)
	if h.credentials != nil || everything {
		reg(new(kmsg.DescribeUserSCRAMCredentialsRequest), 0, 0, h.describeUserScramCredentials)
		reg(new(kmsg.AlterUserSCRAMCredentialsRequest), 0, 0, h.alterUserScramCredentials)
	}
	if h.acls != nil || everything {
		reg(new(kmsg.DescribeACLsRequest), 0, 3, h.describeACLs)
		reg(new(kmsg.CreateACLsRequest), 0, 3, h.createACLs)
		reg(new(kmsg.DeleteACLsRequest), 0, 3, h.deleteACLs)
	}
	if h.features != nil || everything {
		reg(new(kmsg.UpdateFeaturesRequest), 0, 1, h.updateFeatures)
	}
}

// WithACLs makes the handlers serve CreateAcls, DescribeAcls and
// DeleteAcls over s. Call it before Register.
func (h *Handlers) WithACLs(s ACLStore) *Handlers {
	h.acls = s
	return h
}

// WithCredentials makes the handlers serve DescribeUserScramCredentials
// and AlterUserScramCredentials over c. Call it before Register.
func (h *Handlers) WithCredentials(c Credentials) *Handlers {
	h.credentials = c
	return h
}

// shardFor returns the shard serving a group id: Kafka's partitionFor
// over the shards the handlers serve.
func (h *Handlers) shardFor(groupID string) Shard {
	return h.shards[h.shardOf(groupID)]
}

// shardOf is the index of the shard serving a group id.
func (h *Handlers) shardOf(groupID string) int32 {
	return groups.PartitionFor(groupID, int32(len(h.shards)))
}

// typed asserts a request's concrete type; the mux only routes a key to its
// own handler, so a mismatch is a registration bug.
func typed[T kmsg.Request](req kmsg.Request) (T, error) {
	r, ok := req.(T)
	if !ok {
		return r, fmt.Errorf("api: got %T for key %d", req, req.Key())
	}
	return r, nil
}
