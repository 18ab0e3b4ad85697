package server

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The defaults of design.md's table and the listener's limits, which are
// Kafka's except queued.max.request.bytes (Kafka: -1), then kcoord's own.
var kafkaDefaults = map[string]string{
	"offsets.topic.num.partitions":     "", // unset: the cluster's
	"offsets.topic.replication.factor": "3",
	"group.initial.rebalance.delay.ms": "3000",
	"group.min.session.timeout.ms":     "6000",
	"group.max.session.timeout.ms":     "1800000",
	"group.max.size":                   "2147483647",

	"group.consumer.session.timeout.ms":        "45000",
	"group.consumer.min.session.timeout.ms":    "45000",
	"group.consumer.max.session.timeout.ms":    "60000",
	"group.consumer.heartbeat.interval.ms":     "5000",
	"group.consumer.min.heartbeat.interval.ms": "5000",
	"group.consumer.max.heartbeat.interval.ms": "15000",
	"group.consumer.max.size":                  "2147483647",
	"group.consumer.migration.policy":          "bidirectional",

	"offsets.retention.minutes":           "10080",
	"offsets.retention.check.interval.ms": "600000",
	"offset.metadata.max.bytes":           "4096",
	"offsets.commit.timeout.ms":           "5000",
	"socket.request.max.bytes":            "104857600",
	"max.connections":                     "2147483647",
	"max.connections.per.ip":              "2147483647",
	"queued.max.request.bytes":            "209715200",

	"sasl.enabled.mechanisms":      "",
	"super.users":                  "",
	"connections.max.reauth.ms":    "0",
	"sasl.server.max.receive.size": "524288",

	"leader.replication.throttled.rate": "9223372036854775807", // Kafka's Long.MAX_VALUE: unbounded

	"kcoord.max.partitions.per.topic":                  "4096",
	"kcoord.max.topics":                                "10000",
	"kcoord.max.partitions":                            "100000",
	"kcoord.group.election.hold.ms":                    "2000",
	"kcoord.placement.max.concurrent.moves":            "4",
	"kcoord.shutdown.drain.ms":                         "4000",
	"kcoord.log.max.sync.ms":                           "2000",
	"kcoord.metadata.max.staleness.ms":                 "5000",
	"kcoord.features.auto.finalize":                    "true",
	"kcoord.offsets.commit.unregistered.topics.enable": "false",
}

func TestKafkaConfigKeysAndDefaults(t *testing.T) {
	keys := KafkaConfigKeys()
	if len(keys) != len(kafkaDefaults) {
		t.Fatalf("KafkaConfigKeys() has %d keys, want %d", len(keys), len(kafkaDefaults))
	}
	cfg := DefaultConfig()
	for _, k := range keys {
		want, ok := kafkaDefaults[k]
		if !ok {
			t.Errorf("unexpected key %q", k)
			continue
		}
		got, ok := cfg.KafkaConfig(k)
		if !ok || got != want {
			t.Errorf("default %s = %q, %v; want %q", k, got, ok, want)
		}
		if KafkaConfigHelp(k) == "" {
			t.Errorf("no help for %s", k)
		}
	}
	if _, ok := cfg.KafkaConfig("no.such.key"); ok {
		t.Error("KafkaConfig accepted an unknown key")
	}
}

func TestSetKafkaConfig(t *testing.T) {
	tests := []struct {
		key, value string
		check      func(c Config) bool
	}{
		{"offsets.topic.num.partitions", "6", func(c Config) bool { return c.OffsetsTopicNumPartitions == 6 }},
		{"offsets.topic.replication.factor", "1", func(c Config) bool { return c.OffsetsTopicReplicationFactor == 1 }},
		{"group.initial.rebalance.delay.ms", "0", func(c Config) bool { return c.GroupInitialRebalanceDelay == 0 }},
		{"group.min.session.timeout.ms", "1500", func(c Config) bool { return c.GroupMinSessionTimeout == 1500*time.Millisecond }},
		{"group.max.session.timeout.ms", "300000", func(c Config) bool { return c.GroupMaxSessionTimeout == 5*time.Minute }},
		{"group.max.size", "100", func(c Config) bool { return c.GroupMaxSize == 100 }},
		{"offsets.retention.minutes", "60", func(c Config) bool { return c.OffsetsRetention == time.Hour }},
		{"offsets.retention.check.interval.ms", "1000", func(c Config) bool { return c.OffsetsRetentionCheckInterval == time.Second }},
		{"offsets.retention.check.interval.ms", "9000000000000", func(c Config) bool {
			return c.OffsetsRetentionCheckInterval == 9000000000000*time.Millisecond
		}},
		{"offset.metadata.max.bytes", "0", func(c Config) bool { return c.OffsetMetadataMaxBytes == 0 }},
		{"offsets.commit.timeout.ms", "250", func(c Config) bool { return c.OffsetsCommitTimeout == 250*time.Millisecond }},
		{"socket.request.max.bytes", "1048576", func(c Config) bool { return c.SocketRequestMaxBytes == 1<<20 }},
		{"group.max.size", " 7 ", func(c Config) bool { return c.GroupMaxSize == 7 }},
		{"max.connections", "1000", func(c Config) bool { return c.MaxConnections == 1000 }},
		{"max.connections.per.ip", "10", func(c Config) bool { return c.MaxConnectionsPerIP == 10 }},
		{"queued.max.request.bytes", "-1", func(c Config) bool { return c.QueuedMaxRequestBytes == -1 }},
		{"queued.max.request.bytes", "10000000000", func(c Config) bool { return c.QueuedMaxRequestBytes == 10_000_000_000 }},
		{"kcoord.max.partitions.per.topic", "64", func(c Config) bool { return c.MaxPartitionsPerTopic == 64 }},
		{"kcoord.max.topics", "5", func(c Config) bool { return c.MaxTopics == 5 }},
		{"kcoord.max.partitions", "2147483647", func(c Config) bool { return c.MaxPartitions == 2147483647 }},
		{"kcoord.offsets.commit.unregistered.topics.enable", "true", func(c Config) bool { return c.OffsetsCommitUnregisteredTopics }},
		{"kcoord.offsets.commit.unregistered.topics.enable", "false", func(c Config) bool { return !c.OffsetsCommitUnregisteredTopics }},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			c := DefaultConfig()
			if err := c.SetKafkaConfig(tt.key, tt.value); err != nil {
				t.Fatalf("SetKafkaConfig: %v", err)
			}
			if !tt.check(c) {
				t.Fatalf("field not set: %+v", c)
			}
			if got, _ := c.KafkaConfig(tt.key); got != strings.TrimSpace(tt.value) {
				t.Errorf("KafkaConfig(%s) = %q after setting %q", tt.key, got, tt.value)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestSetKafkaConfigErrors(t *testing.T) {
	tests := []struct {
		key, value string
		wantErr    []string // substrings of the error
	}{
		{"no.such.key", "1", []string{`"no.such.key"`, "unknown", "offsets.topic.num.partitions"}},
		{"", "1", []string{"unknown"}},
		{"offsets.topic.num.partitions", "abc", []string{"offsets.topic.num.partitions", `"abc"`, "not an integer"}},
		{"offsets.topic.num.partitions", "", []string{"not an integer"}},
		{"offsets.topic.num.partitions", "1.5", []string{"not an integer"}},
		{"offsets.topic.num.partitions", "0", []string{`"0"`, "between 1 and"}},
		{"offsets.topic.num.partitions", "2147483648", []string{"between 1 and 2147483647"}},
		{"offsets.topic.replication.factor", "32768", []string{"between 1 and 32767"}},
		{"group.initial.rebalance.delay.ms", "-1", []string{"group.initial.rebalance.delay.ms", "between 0 and"}},
		{"group.max.size", "0", []string{"group.max.size"}},
		{"offsets.retention.minutes", "0", []string{"offsets.retention.minutes"}},
		{"offsets.retention.check.interval.ms", "99999999999999999", []string{"offsets.retention.check.interval.ms"}},
		{"offsets.commit.timeout.ms", "0", []string{"offsets.commit.timeout.ms"}},
		{"socket.request.max.bytes", "-5", []string{"socket.request.max.bytes", `"-5"`}},
		{"offset.metadata.max.bytes", "99999999999999999999", []string{"not an integer"}},
		{"max.connections", "0", []string{"max.connections", "between 1 and"}},
		{"max.connections.per.ip", "-1", []string{"max.connections.per.ip", "between 1 and"}},
		{"queued.max.request.bytes", "-2", []string{"queued.max.request.bytes", "between -1 and 9223372036854775807"}},
		{"kcoord.max.partitions.per.topic", "0", []string{"kcoord.max.partitions.per.topic", "between 1 and 2147483647"}},
		{"kcoord.max.topics", "-1", []string{"kcoord.max.topics"}},
		{"kcoord.max.partitions", "2147483648", []string{"kcoord.max.partitions"}},
		{"kcoord.offsets.commit.unregistered.topics.enable", "yes", []string{"kcoord.offsets.commit.unregistered.topics.enable", `"yes"`, "true or false"}},
		{"kcoord.offsets.commit.unregistered.topics.enable", "1", []string{"true or false"}},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			c := DefaultConfig()
			err := c.SetKafkaConfig(tt.key, tt.value)
			if err == nil {
				t.Fatal("SetKafkaConfig accepted it")
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if !reflect.DeepEqual(c, DefaultConfig()) {
				t.Errorf("a rejected value changed the config: %+v", c)
			}
		})
	}
}

func TestKafkaConfigBooleanIgnoresCase(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKafkaConfig("kcoord.offsets.commit.unregistered.topics.enable", " TRUE "); err != nil {
		t.Fatal(err)
	}
	if !c.OffsetsCommitUnregisteredTopics {
		t.Fatal("TRUE did not turn it on")
	}
	if got, _ := c.KafkaConfig("kcoord.offsets.commit.unregistered.topics.enable"); got != "true" {
		t.Fatalf("KafkaConfig = %q, want true", got)
	}
}

func TestValidateQueuedMaxRequestBytes(t *testing.T) {
	for _, tt := range []struct {
		queued int64
		ok     bool
	}{
		{-1, true},
		{104857600, true},
		{209715200, true},
		{104857599, false},
		{0, false},
	} {
		c := DefaultConfig()
		c.QueuedMaxRequestBytes = tt.queued
		err := c.Validate()
		if tt.ok && err != nil {
			t.Errorf("queued.max.request.bytes %d: %v", tt.queued, err)
		}
		if !tt.ok && (err == nil || !strings.Contains(err.Error(), "queued.max.request.bytes")) {
			t.Errorf("queued.max.request.bytes %d: Validate = %v, want an error naming it", tt.queued, err)
		}
	}
}
