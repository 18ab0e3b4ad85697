package conformance

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scenario is one scripted conversation with a group coordinator.
type Scenario struct {
	// Name is the subtest name.
	Name string
	// Config is the broker configuration both servers run with.
	Config Config
	// Steps is the script; Group nests steps.
	Steps []Step
}

// Config is the broker configuration of a scenario, by Kafka config name.
// The zero value of a field means DefaultConfig's.
type Config struct {
	// InitialDelay is group.initial.rebalance.delay.ms (kfake has no
	// initial delay: scripts that depend on it carry Kafka's answers).
	InitialDelay time.Duration
	// MinSession and MaxSession are group.min/max.session.timeout.ms.
	MinSession, MaxSession time.Duration
	// MaxSize is group.max.size.
	MaxSize int32
	// MetadataMaxBytes is offset.metadata.max.bytes (kfake does not
	// enforce it).
	MetadataMaxBytes int32
	// Retention is offsets.retention.minutes (kfake takes milliseconds
	// through its offset.retention.ms extension).
	Retention time.Duration
	// RetentionCheck is offsets.retention.check.interval.ms.
	RetentionCheck time.Duration
	// ConsumerHeartbeat and ConsumerSession are
	// group.consumer.heartbeat.interval.ms and
	// group.consumer.session.timeout.ms (KIP-848 groups).
	ConsumerHeartbeat, ConsumerSession time.Duration
}

// DefaultConfig is the configuration scenarios start from: Kafka's defaults
// with timers short enough for tests.
var DefaultConfig = Config{
	InitialDelay:     100 * time.Millisecond,
	MinSession:       100 * time.Millisecond,
	MaxSession:       60 * time.Second,
	MaxSize:          2147483647,
	MetadataMaxBytes: 4096,
	Retention:        7 * 24 * time.Hour,
	RetentionCheck:   10 * time.Minute,
	// Kafka's defaults: the interval is in every ConsumerGroupHeartbeat
	// answer, and no script runs long enough to miss a session.
	ConsumerHeartbeat: 5 * time.Second,
	ConsumerSession:   45 * time.Second,
}

// WithDefaults fills the zero fields of c from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig
	if c.InitialDelay == 0 {
		c.InitialDelay = d.InitialDelay
	}
	if c.MinSession == 0 {
		c.MinSession = d.MinSession
	}
	if c.MaxSession == 0 {
		c.MaxSession = d.MaxSession
	}
	if c.MaxSize == 0 {
		c.MaxSize = d.MaxSize
	}
	if c.MetadataMaxBytes == 0 {
		c.MetadataMaxBytes = d.MetadataMaxBytes
	}
	if c.Retention == 0 {
		c.Retention = d.Retention
	}
	if c.RetentionCheck == 0 {
		c.RetentionCheck = d.RetentionCheck
	}
	if c.ConsumerHeartbeat == 0 {
		c.ConsumerHeartbeat = d.ConsumerHeartbeat
	}
	if c.ConsumerSession == 0 {
		c.ConsumerSession = d.ConsumerSession
	}
	return c
}

// Topics are the topics every scenario's servers hold, with Partitions
// partitions each (created in kcoord's registry, seeded in kfake).
var Topics = []string{"t1", "t2", "t3"}

// Partitions is the partition count of each of Topics.
const Partitions = 3

type op uint8

const (
	opDo op = iota
	opSend
	opAwait
	opWait
	opSleep
	opGroup
)

// Step is one step of a script. Build steps with Do, Send, Await, Wait,
// Sleep and Group.
type Step struct {
	op     op
	member string
	req    kmsg.Request
	d      time.Duration
	group  []Step

	// kafka is Apache Kafka's answer where kfake departs; why names the
	// departure and the Kafka source the answer comes from.
	kafka, why string
	// outcomes, on a group, lists the transcripts the group may have
	// (see Either).
	outcomes [][]string
}

// Do sends req on member's connection and records the answer.
func Do(member string, req kmsg.Request) Step {
	return Step{op: opDo, member: member, req: req}
}

// Send sends req on member's connection without waiting for the answer;
// Await or Wait records it. A member has at most one request pending.
func Send(member string, req kmsg.Request) Step {
	return Step{op: opSend, member: member, req: req}
}

// Await records the answer to member's pending request.
func Await(member string) Step { return Step{op: opAwait, member: member} }

// Wait records the answer to member's pending request if it arrives within
// d, and that it is still pending otherwise (it stays pending).
func Wait(member string, d time.Duration) Step {
	return Step{op: opWait, member: member, d: d}
}

// Sleep pauses the script.
func Sleep(d time.Duration) Step { return Step{op: opSleep, d: d} }

// Group makes one step of several, for reusable script fragments.
func Group(steps ...Step) Step { return Step{op: opGroup, group: steps} }

// Kafka states Apache Kafka's answer to this step where kfake's differs:
// kcoord is compared with line instead of kfake's answer. why names the
// departure and the Kafka source file the answer comes from.
func (s Step) Kafka(line, why string) Step {
	s.kafka, s.why = line, why
	return s
}

// Either is a group of steps that race: their answers depend on the order
// the server serialises concurrent requests in. outcomes lists every
// correct transcript of the group (the lines of its answering steps, in
// order), one per order. A transcript among outcomes is recorded as one
// canonical line; any other is recorded as it is.
func Either(outcomes [][]string, steps ...Step) Step {
	return Step{op: opGroup, group: steps, outcomes: outcomes}
}

// flatten lists the leaf steps of steps in order.
func flatten(steps []Step) []Step {
	var out []Step
	for _, s := range steps {
		if s.op == opGroup {
			out = append(out, flatten(s.group)...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// Leaves lists the steps of sc in order, with groups expanded: the
// transcript of sc has one entry per leaf.
func (sc Scenario) Leaves() []Step { return flatten(sc.Steps) }

// Override returns the Kafka answer a step states (see Step.Kafka).
func (s Step) Override() (line, why string, ok bool) {
	return s.kafka, s.why, s.kafka != ""
}
