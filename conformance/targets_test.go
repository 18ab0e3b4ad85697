package conformance

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/server"
	"github.com/kcoord/kcoord/transport"
)

// startKfake starts a one-broker kfake cluster configured as cfg and
// returns its address. kfake has no initial rebalance delay and no
// offset.metadata.max.bytes; scripts that depend on them state Kafka's
// answers.
func startKfake(t *testing.T, cfg Config) string {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(Partitions, Topics...),
		kfake.GroupMinSessionTimeout(cfg.MinSession),
		kfake.GroupMaxSessionTimeout(cfg.MaxSession),
		kfake.BrokerConfigs(map[string]string{
			"group.max.size": strconv.Itoa(int(cfg.MaxSize)),
			// kfake's extension: offsets.retention.minutes in ms.
			"offset.retention.ms":                  strconv.FormatInt(cfg.Retention.Milliseconds(), 10),
			"offsets.retention.check.interval.ms":  strconv.FormatInt(cfg.RetentionCheck.Milliseconds(), 10),
			"group.consumer.heartbeat.interval.ms": strconv.FormatInt(cfg.ConsumerHeartbeat.Milliseconds(), 10),
			"group.consumer.session.timeout.ms":    strconv.FormatInt(cfg.ConsumerSession.Milliseconds(), 10),
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// startKcoord starts an in-process kcoord node configured as cfg, with
// Topics registered, and returns its address.
func startKcoord(t *testing.T, cfg Config) string {
	t.Helper()
	sc := server.TestConfig(t.TempDir())
	sc.GroupInitialRebalanceDelay = cfg.InitialDelay
	sc.GroupMinSessionTimeout = cfg.MinSession
	sc.GroupMaxSessionTimeout = cfg.MaxSession
	sc.GroupMaxSize = cfg.MaxSize
	sc.OffsetMetadataMaxBytes = cfg.MetadataMaxBytes
	sc.OffsetsRetention = cfg.Retention
	sc.OffsetsRetentionCheckInterval = cfg.RetentionCheck
	sc.GroupConsumerHeartbeatInterval = cfg.ConsumerHeartbeat
	sc.GroupConsumerMinHeartbeatInterval = min(sc.GroupConsumerMinHeartbeatInterval, cfg.ConsumerHeartbeat)
	sc.GroupConsumerMaxHeartbeatInterval = max(sc.GroupConsumerMaxHeartbeatInterval, cfg.ConsumerHeartbeat)
	sc.GroupConsumerSessionTimeout = cfg.ConsumerSession
	sc.GroupConsumerMinSessionTimeout = min(sc.GroupConsumerMinSessionTimeout, cfg.ConsumerSession)
	sc.GroupConsumerMaxSessionTimeout = max(sc.GroupConsumerMaxSessionTimeout, cfg.ConsumerSession)
	s := server.StartTestServer(t, sc)
	addr := s.KafkaAddr().String()
	createTopics(t, addr)
	return addr
}

// roundTrip sends req to the server at addr on a connection of its own
// and returns the response, failing the test on any error.
func roundTrip(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := transport.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Do(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// createTopics registers Topics in kcoord (kfake seeds them).
func createTopics(t *testing.T, addr string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 10000
	for _, name := range Topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, Partitions, 1
		req.Topics = append(req.Topics, rt)
	}
	resp := roundTrip(t, addr, req)
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("creating topic %s: %v", rt.Topic, err)
		}
	}
}
