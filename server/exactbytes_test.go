package server

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/release"
	"github.com/kcoord/kcoord/transport"
)

// fffdEqualGroupIDs are distinct byte strings that a text encoding (JSON,
// or decoding with replacement) turns into the one string "x-a\uFFFD".
var fffdEqualGroupIDs = []string{"x-a\xfe", "x-a\xff", "x-a\uFFFD"}

const exactBytesTopic = "exact-bytes"

// TestInvalidUTF8GroupIDsKeepTheirOwnOffsetsAcrossRestart commits a
// different offset for each id over the Kafka protocol, fetches each back,
// then snapshots every shard (packed), commits once more (so the restart replays log
// entries on top of the snapshot), kills the node and restarts it: every id
// still answers its own offsets and metadata.
func TestInvalidUTF8GroupIDsKeepTheirOwnOffsetsAcrossRestart(t *testing.T) {
	servers := StartTestCluster(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	want := commitEachID(ctx, t, servers[0])
	for _, offsets := range want {
		offsets[1] = -1 // partition 1 has no commit yet
	}
	checkOffsetsOverKafka(ctx, t, servers[0], want)

	// Stamped at the latest level, the shards write packed snapshots
	// (fsm/packedsnapshot.go): the restart restores the ids' offsets from
	// one.
	waitFor(t, 20*time.Second, "every shard stamped at the latest level", func() bool { return stamped(servers, release.MaxLevel) })
	snapshotEveryShard(t, servers[0])
	for i, id := range fffdEqualGroupIDs {
		offset := int64(10 * (i + 1))
		commitOverKafka(ctx, t, servers[0], id, 1, offset)
		want[id][1] = offset
	}
	checkOffsetsOverKafka(ctx, t, servers[0], want)

	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	servers[0] = RestartTestNode(t, servers, 0)
	waitAllReady(t, servers)
	checkOffsetsOverKafka(ctx, t, servers[0], want)
}

// TestInvalidUTF8GroupIDsKeepTheirOwnOffsetsAcrossLeaderKill commits a
// different offset for each id on a three-node cluster, kills the node that
// coordinates them (the ids hash alike, so they share a shard) and fetches
// them from the new leader, whose state came only from applying the entries
// it replicated.
func TestInvalidUTF8GroupIDsKeepTheirOwnOffsetsAcrossLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster")
	}
	servers := StartTestCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	want := commitEachID(ctx, t, servers[0])
	checkOffsetsOverKafka(ctx, t, servers[0], want)

	leader := coordinatorNodeOf(ctx, t, servers[0], fffdEqualGroupIDs[0])
	if err := servers[leader-1].Kill(); err != nil {
		t.Fatal(err)
	}
	checkOffsetsOverKafka(ctx, t, servers[leader%3], want)
}

// commitEachID creates the test topic and commits a different offset on its
// partition 0 for each of fffdEqualGroupIDs through s; it returns what each
// id committed.
func commitEachID(ctx context.Context, t *testing.T, s *Server) map[string]map[int32]int64 {
	t.Helper()
	createTopicOverKafka(ctx, t, s, exactBytesTopic, 2)
	want := map[string]map[int32]int64{}
	for i, id := range fffdEqualGroupIDs {
		offset := int64(1000 * (i + 1))
		commitOverKafka(ctx, t, s, id, 0, offset)
		want[id] = map[int32]int64{0: offset}
	}
	return want
}

// snapshotEveryShard makes each shard of s (and the metadata group) take a
// snapshot now, so a restart restores from it.
func snapshotEveryShard(t *testing.T, s *Server) {
	t.Helper()
	for _, sh := range s.Node().Shards() {
		if err := sh.Raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			t.Fatalf("snapshot of shard %d: %v", sh.ID, err)
		}
	}
}

// retryKafka calls fn until it reports done, sleeping between attempts while
// fn's error code is retriable; other codes fail the test.
func retryKafka(ctx context.Context, t *testing.T, what string, fn func() (int16, error)) {
	t.Helper()
	for {
		code, err := fn()
		if err == nil && code == 0 {
			return
		}
		if err == nil {
			if ke := kerr.ErrorForCode(code); !kerr.IsRetriable(ke) && !errors.Is(ke, kerr.NotController) {
				t.Fatalf("%s: %v", what, ke)
			}
			err = kerr.ErrorForCode(code)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kafkaDo sends one request at version to addr on a fresh connection.
func kafkaDo(ctx context.Context, addr string, req kmsg.Request, version int16) (kmsg.Response, error) {
	c, err := transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req.SetVersion(version)
	return c.Do(ctx, req)
}

// createTopicOverKafka creates topic through the controller (the metadata
// group's leader) that s names in its Metadata answer.
func createTopicOverKafka(ctx context.Context, t *testing.T, s *Server, topic string, partitions int32) {
	t.Helper()
	retryKafka(ctx, t, "create "+topic, func() (int16, error) {
		mresp, err := kafkaDo(ctx, s.KafkaAddr().String(), kmsg.NewPtrMetadataRequest(), 7)
		if err != nil {
			return 0, err
		}
		controller := ""
		for _, b := range mresp.(*kmsg.MetadataResponse).Brokers {
			if b.NodeID == mresp.(*kmsg.MetadataResponse).ControllerID {
				controller = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
		}
		if controller == "" {
			return kerr.NotController.Code, nil
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 5000
		resp, err := kafkaDo(ctx, controller, req, 7)
		if err != nil {
			return 0, err
		}
		return resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, nil
	})
}

// coordinatorOf asks s for the coordinator of group and returns its address.
func coordinatorOf(ctx context.Context, t *testing.T, s *Server, group string) string {
	t.Helper()
	r := findCoordinator(ctx, t, s, group)
	return net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port)))
}

// coordinatorNodeOf asks s for the coordinator of group and returns its id.
func coordinatorNodeOf(ctx context.Context, t *testing.T, s *Server, group string) int32 {
	t.Helper()
	return findCoordinator(ctx, t, s, group).NodeID
}

func findCoordinator(ctx context.Context, t *testing.T, s *Server, group string) *kmsg.FindCoordinatorResponse {
	t.Helper()
	var r *kmsg.FindCoordinatorResponse
	retryKafka(ctx, t, "find coordinator of "+strconv.Quote(group), func() (int16, error) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		resp, err := kafkaDo(ctx, s.KafkaAddr().String(), req, 3)
		if err != nil {
			return 0, err
		}
		r = resp.(*kmsg.FindCoordinatorResponse)
		return r.ErrorCode, nil
	})
	return r
}

func exactBytesMetadata(group string, partition int32) string {
	return "meta:" + group + ":" + strconv.Itoa(int(partition))
}

// commitOverKafka commits offset for one partition of exactBytesTopic as a
// simple consumer (generation -1) through the group's coordinator.
func commitOverKafka(ctx context.Context, t *testing.T, s *Server, group string, partition int32, offset int64) {
	t.Helper()
	retryKafka(ctx, t, "commit for "+strconv.Quote(group), func() (int16, error) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = exactBytesTopic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		meta := exactBytesMetadata(group, partition)
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = partition, offset, -1, &meta
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := kafkaDo(ctx, coordinatorOf(ctx, t, s, group), req, 8)
		if err != nil {
			return 0, err
		}
		return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, nil
	})
}

// checkOffsetsOverKafka fetches every group's partitions of exactBytesTopic
// from its coordinator and compares them with want (-1: none committed).
func checkOffsetsOverKafka(ctx context.Context, t *testing.T, s *Server, want map[string]map[int32]int64) {
	t.Helper()
	for group, parts := range want {
		var got *kmsg.OffsetFetchResponse
		retryKafka(ctx, t, "fetch for "+strconv.Quote(group), func() (int16, error) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = group
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic = exactBytesTopic
			for p := range parts {
				rt.Partitions = append(rt.Partitions, p)
			}
			req.Topics = append(req.Topics, rt)
			resp, err := kafkaDo(ctx, coordinatorOf(ctx, t, s, group), req, 6)
			if err != nil {
				return 0, err
			}
			got = resp.(*kmsg.OffsetFetchResponse)
			return got.ErrorCode, nil
		})
		if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != len(parts) {
			t.Fatalf("group %q: fetch answered %+v", group, got.Topics)
		}
		for _, p := range got.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("group %q partition %d: %v", group, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			if p.Offset != parts[p.Partition] {
				t.Errorf("group %q partition %d: offset %d, want %d", group, p.Partition, p.Offset, parts[p.Partition])
				continue
			}
			if p.Offset >= 0 {
				if wantMeta := exactBytesMetadata(group, p.Partition); p.Metadata == nil || *p.Metadata != wantMeta {
					t.Errorf("group %q partition %d: metadata %+q, want %+q", group, p.Partition, deref(p.Metadata), wantMeta)
				}
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
