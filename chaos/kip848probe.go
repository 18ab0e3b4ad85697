package chaos

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeWait bounds how long a probe member heartbeats for its assignment.
const probeWait = 10 * time.Second

// KIP848Probe is what the workload learned of the server's consumer
// protocol (KIP-848) before its groups started: whether the server runs
// it at all and, per server assignor, whether a lone member subscribed to
// the topic is assigned every partition of it. A KIP-848 group that fails
// liveness quotes it, so that the failure names its cause.
type KIP848Probe struct {
	// Absent says why the server cannot run a consumer-protocol group as
	// franz-go does (ConsumerGroupHeartbeat v1, Kafka 4.0); "" when it
	// can, or when the probe could not tell.
	Absent string
	// Assignors holds, per server assignor probed, what kept a lone
	// member from every partition (what ConsumerGroupHeartbeat answered,
	// or what it was assigned); "" when nothing did.
	Assignors map[string]string
}

// probeKIP848 asks the server's ApiVersions for ConsumerGroupHeartbeat,
// then, for each server assignor, runs one lone member in a throwaway
// group (named after cfg.Prefix) until it is assigned every partition of
// cfg.Topic, and makes it leave. Called by Workload.Start from the run's
// goroutine, after the topic exists; a server that cannot be reached
// leaves the probe undecided, not failed.
func probeKIP848(ctx context.Context, cfg WorkloadConfig, assignors []string) KIP848Probe {
	p := KIP848Probe{Assignors: map[string]string{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("kcoord-verify"))
	if err != nil {
		for _, a := range assignors {
			p.Assignors[a] = "the probe could not start: " + err.Error()
		}
		return p
	}
	defer cl.Close()
	if p.Absent = consumerProtocolAbsent(ctx, kadm.NewClient(cl)); p.Absent != "" {
		return p
	}
	for _, a := range assignors {
		why, absent := probeAssignor(ctx, cl, cfg, a)
		if absent {
			p.Absent = why
			return p
		}
		p.Assignors[a] = why
	}
	return p
}

// consumerProtocolAbsent says why no broker's ApiVersions lists
// ConsumerGroupHeartbeat v1, which franz-go needs to run a group on the
// consumer protocol (it falls back to the classic one otherwise), or ""
// when one does or none answered.
func consumerProtocolAbsent(ctx context.Context, adm *kadm.Client) string {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return ""
	}
	why := ""
	for _, v := range versions.Sorted() {
		if v.Err != nil {
			continue
		}
		maxVersion, ok := v.KeyMaxVersion(kmsg.ConsumerGroupHeartbeat.Int16())
		switch {
		case ok && maxVersion >= 1:
			return ""
		case ok:
			why = fmt.Sprintf("broker %d's ApiVersions lists ConsumerGroupHeartbeat up to v%d only, and franz-go needs v1 (Kafka 4.0) for the consumer protocol", v.NodeID, maxVersion)
		default:
			why = fmt.Sprintf("broker %d's ApiVersions lists no ConsumerGroupHeartbeat (the consumer protocol, KIP-848)", v.NodeID)
		}
	}
	return why
}

// probeAssignor joins a throwaway group as a lone consumer-protocol member
// subscribed to cfg.Topic with the server assignor, heartbeats until it is
// assigned every partition or probeWait passes, and leaves. It returns
// what went wrong ("" when nothing did), and absent when the answer shows
// that the server does not run the consumer protocol at all.
func probeAssignor(ctx context.Context, cl *kgo.Client, cfg WorkloadConfig, assignor string) (why string, absent bool) {
	group, memberID := cfg.Prefix+"-probe-"+assignor, newMemberID()
	epoch, assigned := int32(0), 0
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{} // a join reports an empty list, not a null one
	var lastErr error
	joined := false
	defer func() {
		if joined {
			leaveProbe(ctx, cl, cfg, group, memberID)
		}
	}()
	deadline := time.Now().Add(probeWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, memberID, epoch
		req.RebalanceTimeoutMillis = int32(cfg.SessionTimeout.Milliseconds())
		req.SubscribedTopicNames = []string{cfg.Topic}
		req.ServerAssignor = &assignor
		req.Topics = owned
		hbCtx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		resp, err := req.RequestWith(hbCtx, cl)
		cancel()
		wait := 200 * time.Millisecond
		switch {
		case err != nil:
			lastErr = err
		case resp.ErrorCode != 0:
			ke := kerr.TypedErrorForCode(resp.ErrorCode)
			answer := fmt.Sprintf("ConsumerGroupHeartbeat answered %s", ke.Message)
			if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
				answer += fmt.Sprintf(" (%q)", *resp.ErrorMessage)
			}
			switch {
			case errors.Is(ke, kerr.UnsupportedVersion):
				return answer + ": the server lists the API but does not run the consumer protocol", true
			case kerr.IsRetriable(ke):
				lastErr = ke
			default:
				return answer, false
			}
		default:
			joined = true
			epoch = resp.MemberEpoch
			if resp.Assignment != nil {
				owned, assigned = ownedTopics(resp.Assignment)
			}
			if int32(assigned) >= cfg.Partitions {
				return "", false
			}
			if resp.HeartbeatIntervalMillis > 0 {
				wait = min(500*time.Millisecond, time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond)
			}
		}
		sleep(ctx, wait)
	}
	if !joined {
		return fmt.Sprintf("ConsumerGroupHeartbeat got no answer within %v: %v", probeWait, lastErr), false
	}
	return fmt.Sprintf("it heartbeat without error for %v and was assigned %d of the %d (member epoch %d)",
		probeWait, assigned, cfg.Partitions, epoch), false
}

// ownedTopics turns the assignment of a heartbeat answer into the owned
// partitions of the next heartbeat, and counts them.
func ownedTopics(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) ([]kmsg.ConsumerGroupHeartbeatRequestTopic, int) {
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	n := 0
	for _, t := range a.Topics {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t.TopicID, t.Partitions
		owned = append(owned, rt)
		n += len(t.Partitions)
	}
	return owned, n
}

// leaveProbe takes the probe member out of its group (member epoch -1),
// so the group is empty and its partitions free at once.
func leaveProbe(ctx context.Context, cl *kgo.Client, cfg WorkloadConfig, group, memberID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, memberID, -1
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		cfg.Logger.Debug("probe member did not leave", "group", group, "error", err)
	}
}

// newMemberID is a member id a consumer-protocol member makes up for
// itself (v1 and later), 16 random bytes as Kafka prints a Uuid.
func newMemberID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], rand.Uint64())
	binary.BigEndian.PutUint64(b[8:], rand.Uint64())
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// topicIDString prints a topic id as Kafka prints a Uuid.
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
