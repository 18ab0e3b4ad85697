package api

// CreateTopics (key 19), versions 0–7.
// v1: ValidateOnly and error messages. v2: throttle. v4: partitions and
// replication factor may be -1 (broker default). v5: flexible; the answer
// carries partitions, replication factor and configs. v7: topic ids.
// Topics are entries in the registry of the metadata Raft group (name →
// partition count); kcoord stores no records for them. Any node takes it:
// one that does not lead the metadata group (the controller) forwards each
// topic to the leader (cluster.Node.ApplyMetadataChange), as KRaft brokers
// forward to their controller (KIP-590), and answers NOT_CONTROLLER only
// when no leader is known or reachable. The limits below are checked
// against this node's replica of the registry, so two nodes creating at
// once may each pass the check with room for one.
// Limits (kcoord's own; Kafka has none): a topic of more than
// kcoord.max.partitions.per.topic partitions is INVALID_PARTITIONS; one that
// would take the registry past kcoord.max.topics topics or
// kcoord.max.partitions partitions in all is POLICY_VIOLATION. They are
// checked with ValidateOnly too, against the registry and the topics before
// it in the same request.
// Needs Cluster CREATE, or Topic CREATE on each topic
// (TOPIC_AUTHORIZATION_FAILED), as in Kafka.

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

const (
	// defaultPartitions is Kafka's num.partitions.
	defaultPartitions = 1
	// defaultReplicationFactor is Kafka's default.replication.factor.
	defaultReplicationFactor = 1
	// maxTopicNameLength is Kafka's limit on topic names.
	maxTopicNameLength = 249
)

func (h *Handlers) createTopics(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.CreateTopicsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int)
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	// The limits are checked against the registry and the topics created
	// before them in this request; creates are serialised so that two
	// requests cannot both pass the check with the room for one.
	h.createMu.Lock()
	defer h.createMu.Unlock()
	usage := h.registryUsage()
	// Cluster CREATE creates any topic; without it each topic needs Topic
	// CREATE. A probe, so no read barrier unless a topic is refused
	// (allowedUnder).
	createInCluster := func() bool { return h.allowedHere(rc, auth.OpCreate, auth.ResourceCluster, auth.ClusterName) }
	clusterCreate := createInCluster()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		var topic fsm.Topic
		err := error(nil)
		if !h.allowedUnder(rc, &clusterCreate, createInCluster, auth.OpCreate, auth.ResourceTopic, t.Topic) {
			err = topicRefusal(rc, t.Topic)
		}
		if err == nil {
			topic, err = h.newTopic(t, seen[t.Topic] > 1)
		}
		if err == nil {
			err = h.checkLimits(usage, topic)
		}
		if err == nil && !req.ValidateOnly {
			err = h.topics.Create(ctx, topic)
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = h.controllerErrorCode(err), errMessage(err)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
		} else {
			usage.topics++
			usage.partitions += int64(topic.Partitions)
			rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = topic.ID, topic.Partitions, topic.ReplicationFactor
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// usage is how much of the registry's limits is taken.
type usage struct {
	topics     int64
	partitions int64
}

// registryUsage counts the registered topics and their partitions.
func (h *Handlers) registryUsage() *usage {
	u := &usage{}
	for _, t := range h.registry.Topics() {
		u.topics++
		u.partitions += int64(t.Partitions)
	}
	return u
}

// checkLimits refuses a topic that would take the registry past
// kcoord.max.topics or kcoord.max.partitions. Kafka has no such limits (a
// KRaft controller refuses one request of more than 10000 records with
// POLICY_VIOLATION, QuorumController.java MAX_RECORDS_PER_USER_OP), so
// kcoord answers POLICY_VIOLATION too.
func (h *Handlers) checkLimits(u *usage, t fsm.Topic) error {
	if u.topics+1 > int64(h.cfg.MaxTopics) {
		return refuse(kerr.PolicyViolation, "Topic '%s' would be topic %d, more than kcoord.max.topics (%d).", t.Name, u.topics+1, h.cfg.MaxTopics)
	}
	if total := u.partitions + int64(t.Partitions); total > int64(h.cfg.MaxPartitions) {
		return refuse(kerr.PolicyViolation, "Topic '%s' would take the registry to %d partitions, more than kcoord.max.partitions (%d).", t.Name, total, h.cfg.MaxPartitions)
	}
	return nil
}

// newTopic validates one requested topic and fills broker defaults, with
// Kafka's rules (ReplicationControlManager.createTopic): -1 partitions or
// replication factor mean the broker default, 0 and anything below -1 are
// invalid. A topic that exists is refused before its settings are looked at.
func (h *Handlers) newTopic(t kmsg.CreateTopicsRequestTopic, duplicate bool) (fsm.Topic, error) {
	if duplicate {
		return fsm.Topic{}, refuse(kerr.InvalidRequest, "topic %q is listed more than once", t.Topic)
	}
	if err := validTopicName(t.Topic); err != nil {
		return fsm.Topic{}, err
	}
	if _, exists := h.registry.Topic(t.Topic); exists {
		return fsm.Topic{}, refuse(kerr.TopicAlreadyExists, "Topic '%s' already exists.", t.Topic)
	}
	topic := fsm.Topic{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return fsm.Topic{}, refuse(kerr.InvalidRequest, "both a replica assignment and partitions or replication factor were given")
		}
		if int64(len(t.ReplicaAssignment)) > int64(h.cfg.MaxPartitionsPerTopic) {
			return fsm.Topic{}, tooManyPartitions(int64(len(t.ReplicaAssignment)), h.cfg.MaxPartitionsPerTopic)
		}
		topic.Partitions = int32(len(t.ReplicaAssignment))
		topic.ReplicationFactor = int16(len(t.ReplicaAssignment[0].Replicas))
	}
	if topic.Partitions == -1 {
		topic.Partitions = defaultPartitions
	}
	if topic.ReplicationFactor == -1 {
		topic.ReplicationFactor = defaultReplicationFactor
	}
	if topic.Partitions <= 0 {
		return fsm.Topic{}, refuse(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	if topic.Partitions > h.cfg.MaxPartitionsPerTopic {
		return fsm.Topic{}, tooManyPartitions(int64(topic.Partitions), h.cfg.MaxPartitionsPerTopic)
	}
	if topic.ReplicationFactor <= 0 {
		return fsm.Topic{}, refuse(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	}
	if n := len(h.cluster.Brokers()); int(topic.ReplicationFactor) > n {
		return fsm.Topic{}, refuse(kerr.InvalidReplicationFactor, "replication factor %d is larger than the %d available brokers", topic.ReplicationFactor, n)
	}
	if len(t.Configs) > 0 {
		topic.Configs = make(map[string]string, len(t.Configs))
		for _, c := range t.Configs {
			if c.Value != nil {
				topic.Configs[c.Name] = *c.Value
			}
		}
	}
	_, _ = rand.Read(topic.ID[:])
	return topic, nil
}

func tooManyPartitions(n int64, limit int32) error {
	return refuse(kerr.InvalidPartitions, "Number of partitions %d is larger than kcoord.max.partitions.per.topic (%d).", n, limit)
}

// validTopicName applies Kafka's topic name rules.
func validTopicName(name string) error {
	bad := func(msg string) error { return refuse(kerr.InvalidTopicException, "%s", msg) }
	switch {
	case name == "":
		return bad("topic name is empty")
	case name == "." || name == "..":
		return bad("topic name cannot be \".\" or \"..\"")
	case len(name) > maxTopicNameLength:
		return bad(fmt.Sprintf("topic name is longer than %d characters", maxTopicNameLength))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return bad(fmt.Sprintf("topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name))
		}
	}
	return nil
}
