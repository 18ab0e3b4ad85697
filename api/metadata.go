package api

// Metadata (key 3), versions 0–13.
// v0: an empty topic list means all topics. v1: controller id, rack,
// internal flag, and a null list means all topics. v2: cluster id. v3:
// throttle. v4: AllowAutoTopicCreation (kcoord never auto-creates: topics
// are registered with CreateTopics). v5: offline replicas. v7: leader
// epoch. v8–v10: authorized operations (none reported). v9: flexible. v10:
// topic ids. v12: topics requested by id only are not supported and are
// reported UNKNOWN_TOPIC_ID. v13: a top-level error code (always none).
// kcoord stores no records; each partition's "leader" is a live node picked
// round-robin so consumers have somewhere to send their (always empty)
// fetches.
// A registered topic with more partitions than kcoord.max.partitions.per.topic
// (created by a kcoord without the limit, or before it was lowered) is
// answered INVALID_PARTITIONS with no partitions, so one such topic cannot
// make every Metadata request build billions of entries.
// Topics need Topic DESCRIBE, as in Kafka: a listing of all topics leaves
// out the others, and one asked for by name is TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) metadata(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.MetadataRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	brokers := h.cluster.Brokers()
	for _, b := range brokers {
		rb := kmsg.NewMetadataResponseBroker()
		host, port, err := splitHostPort(b.KafkaAddr)
		if err != nil {
			continue
		}
		rb.NodeID, rb.Host, rb.Port = b.NodeID, host, port
		resp.Brokers = append(resp.Brokers, rb)
	}
	if id := h.cluster.ClusterID(); id != "" {
		resp.ClusterID = &id // null until the cluster has one, as a KRaft broker before its meta.properties
	}
	// The controller is a live node, as a KRaft broker names one: the
	// metadata leader when known (no forwarding hop), else this node,
	// which forwards CreateTopics and DeleteTopics or answers
	// NOT_CONTROLLER when it cannot.
	resp.ControllerID = h.cfg.NodeID
	if c, ok := h.cluster.Controller(); ok {
		resp.ControllerID = c.NodeID
	}
	resp.AuthorizedOperations = math.MinInt32

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range h.registry.Topics() {
			if h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, t.Name) {
				resp.Topics = append(resp.Topics, h.topicMetadata(t, brokers))
			}
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if !h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, *rt.Topic) {
			mt := kmsg.NewMetadataResponseTopic()
			name := *rt.Topic
			mt.Topic, mt.ErrorCode = &name, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		t, ok := h.lookupTopic(ctx, rc, *rt.Topic)
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			name := *rt.Topic
			mt.Topic, mt.ErrorCode = &name, kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, h.topicMetadata(t, brokers))
	}
	return resp, nil
}

// topicMetadata describes one registered topic.
func (h *Handlers) topicMetadata(t fsm.Topic, brokers []Broker) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, t.ID
	mt.AuthorizedOperations = math.MinInt32
	if t.Partitions > h.cfg.MaxPartitionsPerTopic {
		mt.ErrorCode = kerr.InvalidPartitions.Code
		return mt
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, max(t.Partitions, 0))
	for p := int32(0); p < t.Partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, -1, 0
		if n := len(brokers); n > 0 {
			mp.Leader = brokers[int(p)%n].NodeID
			for r := 0; r < min(int(t.ReplicationFactor), n); r++ {
				mp.Replicas = append(mp.Replicas, brokers[(int(p)+r)%n].NodeID)
			}
			mp.ISR = mp.Replicas
		} else {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
