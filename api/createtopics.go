package api

// CreateTopics (key 19), versions 0–7.
// v1: ValidateOnly and error messages. v2: throttle. v4: partitions and
// replication factor may be -1 (broker default). v5: flexible; the answer
// carries partitions, replication factor and configs. v7: topic ids.
// Topics are entries in the registry of the metadata Raft group (name →
// partition count); kcoord stores no records for them. Only the metadata
// group's leader (the controller) creates topics; other nodes answer
// NOT_CONTROLLER.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

func (h *Handlers) createTopics(ctx context.Context, _ *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.CreateTopicsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int)
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		topic, err := h.newTopic(t, seen[t.Topic] > 1)
		if err == nil && !req.ValidateOnly {
			err = h.topics.Create(ctx, topic)
		} else if err == nil {
			if _, exists := h.topics.Topic(t.Topic); exists {
				err = fsm.ErrTopicExists
			}
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = h.topicErrorCode(err), errMessage(err)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
		} else {
			rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = topic.ID, topic.Partitions, topic.ReplicationFactor
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// topicError carries a Kafka error for a request that fails validation.
type topicError struct {
	code *kerr.Error
	msg  string
}

func (e *topicError) Error() string { return e.msg }

// newTopic validates one requested topic and fills broker defaults.
func (h *Handlers) newTopic(t kmsg.CreateTopicsRequestTopic, duplicate bool) (fsm.Topic, error) {
	if duplicate {
		return fsm.Topic{}, &topicError{kerr.InvalidRequest, fmt.Sprintf("topic %q is listed more than once", t.Topic)}
	}
	if err := validTopicName(t.Topic); err != nil {
		return fsm.Topic{}, err
	}
	topic := fsm.Topic{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return fsm.Topic{}, &topicError{kerr.InvalidRequest, "both a replica assignment and partitions or replication factor were given"}
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
		return fsm.Topic{}, &topicError{kerr.InvalidPartitions, "number of partitions must be larger than 0"}
	}
	if topic.ReplicationFactor <= 0 {
		return fsm.Topic{}, &topicError{kerr.InvalidReplicationFactor, "replication factor must be larger than 0"}
	}
	if n := len(h.cluster.Brokers()); int(topic.ReplicationFactor) > n {
		return fsm.Topic{}, &topicError{kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor %d is larger than the %d available brokers", topic.ReplicationFactor, n)}
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

// validTopicName applies Kafka's topic name rules.
func validTopicName(name string) error {
	bad := func(msg string) error { return &topicError{kerr.InvalidTopicException, msg} }
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

// topicErrorCode maps registry errors; a node that does not lead the
// metadata group is not the controller.
func (h *Handlers) topicErrorCode(err error) int16 {
	var te *topicError
	switch {
	case errors.As(err, &te):
		return te.code.Code
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return kerr.NotController.Code
	}
	return h.errorCode(err)
}

func errMessage(err error) *string {
	s := err.Error()
	return &s
}
