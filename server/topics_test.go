package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawRequest sends req to the node at addr alone (no client-side routing to
// the controller) and returns its answer.
func rawRequest(t *testing.T, ctx context.Context, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// CreateTopics and DeleteTopics sent to any node, the metadata leader or
// not, are applied (forwarded to the leader, as KRaft brokers forward them
// to their controller), and every node's registry then has the change.
func TestTopicChangesOnEveryNode(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	waitAllReady(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, ok := servers[0].Node().MetaLeader()
	if !ok {
		t.Fatal("no metadata leader")
	}
	for i, s := range servers {
		topic := fmt.Sprintf("topic-via-node-%d", i+1)
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 4, 1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp := rawRequest(t, ctx, s.KafkaAddr().String(), req).(*kmsg.CreateTopicsResponse)
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			t.Fatalf("CreateTopics to node %d (metadata leader: node %d): %v", i+1, leader.NodeID, err)
		}
		again := rawRequest(t, ctx, s.KafkaAddr().String(), req).(*kmsg.CreateTopicsResponse)
		if code := again.Topics[0].ErrorCode; code != kerr.TopicAlreadyExists.Code {
			t.Errorf("creating %s again through node %d: %v, want TOPIC_ALREADY_EXISTS", topic, i+1, kerr.ErrorForCode(code))
		}
		waitTopic(t, servers, topic, true)
	}
	for i, s := range servers {
		topic := fmt.Sprintf("topic-via-node-%d", (i+1)%3+1) // another node's topic
		req := kmsg.NewPtrDeleteTopicsRequest()
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, dt)
		req.TopicNames = []string{topic}
		req.TimeoutMillis = 10000
		resp := rawRequest(t, ctx, s.KafkaAddr().String(), req).(*kmsg.DeleteTopicsResponse)
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			t.Fatalf("DeleteTopics of %s to node %d: %v", topic, i+1, err)
		}
		waitTopic(t, servers, topic, false)
	}
}

// waitTopic waits until every node's registry has topic (or has not).
func waitTopic(t *testing.T, servers []*Server, topic string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i, s := range servers {
		for {
			if _, ok := s.meta.Topic(topic); ok == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: topic %s registered %v, want %v", i+1, topic, !want, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
