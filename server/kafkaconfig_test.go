package server

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The defaults of design.md's table, which are Kafka's.
var kafkaDefaults = map[string]string{
	"offsets.topic.num.partitions":        "50",
	"offsets.topic.replication.factor":    "3",
	"group.initial.rebalance.delay.ms":    "3000",
	"group.min.session.timeout.ms":        "6000",
	"group.max.session.timeout.ms":        "1800000",
	"group.max.size":                      "2147483647",
	"offsets.retention.minutes":           "10080",
	"offsets.retention.check.interval.ms": "600000",
	"offset.metadata.max.bytes":           "4096",
	"offsets.commit.timeout.ms":           "5000",
	"socket.request.max.bytes":            "104857600",
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
