package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/transport"
)

// errNotSent marks a request that surely never reached a coordinator.
var errNotSent = errors.New("chaos: request not sent")

// rawClient commits and fetches offsets of one group as a simple consumer
// (no member, generation -1), on one connection to the group's
// coordinator, found through any seed. It never retries: a request whose
// answer is lost is recorded as unknown, so a retry could not land twice
// inside one recorded operation. Used by one goroutine at a time.
type rawClient struct {
	seeds   []string
	timeout time.Duration
	group   string
	conn    *transport.RawClient
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// commit writes offset for (topic, partition) and says what is known of
// its outcome.
func (c *rawClient) commit(ctx context.Context, topic string, partition int32, offset int64) (Outcome, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = c.group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.do(ctx, req)
	if err != nil {
		if errors.Is(err, errNotSent) {
			return Failed, err
		}
		return Unknown, err
	}
	r := resp.(*kmsg.OffsetCommitResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return Unknown, fmt.Errorf("chaos: OffsetCommit answered %d topics for 1", len(r.Topics))
	}
	code := r.Topics[0].Partitions[0].ErrorCode
	if code != 0 {
		c.close()
	}
	return CommitOutcome(code), kerr.ErrorForCode(code)
}

// fetch reads the committed offset of (topic, partition); -1 when none.
func (c *rawClient) fetch(ctx context.Context, topic string, partition int32) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = c.group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, []int32{partition}
	rg.Topics = append(rg.Topics, gt)
	req.Groups = append(req.Groups, rg)
	resp, err := c.do(ctx, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if len(r.Groups) != 1 {
		return 0, fmt.Errorf("chaos: OffsetFetch answered %d groups for 1", len(r.Groups))
	}
	g := r.Groups[0]
	if g.ErrorCode == kerr.GroupIDNotFound.Code {
		// The group and every offset it had are gone (what kfake answers
		// for a group it does not know; Kafka answers -1 offsets).
		return -1, nil
	}
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		c.close()
		return 0, err
	}
	if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("chaos: OffsetFetch answered %d topics for 1", len(g.Topics))
	}
	p := g.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		c.close()
		return 0, err
	}
	return p.Offset, nil
}

func (c *rawClient) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.conn == nil {
		if err := c.connect(ctx); err != nil {
			return nil, fmt.Errorf("%w: %v", errNotSent, err)
		}
	}
	resp, err := c.conn.Do(ctx, req)
	if err != nil {
		c.close()
		return nil, err
	}
	return resp, nil
}

// connect finds the group's coordinator through the first seed that
// answers, and dials it.
func (c *rawClient) connect(ctx context.Context) error {
	var last error = errors.New("no seed brokers")
	for _, seed := range c.seeds {
		addr, err := findCoordinator(ctx, seed, c.group)
		if err != nil {
			last = err
			continue
		}
		conn, err := transport.Dial(ctx, addr)
		if err != nil {
			last = err
			continue
		}
		conn.SetClientID("kcoord-verify")
		c.conn = conn
		return nil
	}
	return last
}

// findCoordinator asks seed for group's coordinator's address.
func findCoordinator(ctx context.Context, seed, group string) (string, error) {
	fc, err := askCoordinator(ctx, seed, group)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(fc.Host, strconv.Itoa(int(fc.Port))), nil
}

// findCoordinatorID asks seed for group's coordinator's node id.
func findCoordinatorID(ctx context.Context, seed, group string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	fc, err := askCoordinator(ctx, seed, group)
	if err != nil {
		return 0, err
	}
	return int(fc.NodeID), nil
}

func askCoordinator(ctx context.Context, seed, group string) (*kmsg.FindCoordinatorResponse, error) {
	conn, err := transport.Dial(ctx, seed)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetClientID("kcoord-verify")
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(3)
	req.CoordinatorKey = group
	resp, err := conn.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	fc := resp.(*kmsg.FindCoordinatorResponse)
	if err := kerr.ErrorForCode(fc.ErrorCode); err != nil {
		return nil, err
	}
	return fc, nil
}

// CommitOutcome classifies an OffsetCommit partition error code. Only the
// errors a coordinator gives before it writes anything (fencing and
// validation) mean the commit did not happen. NOT_COORDINATOR and the
// timeouts can come after the write was handed to replication (a leader
// that lost its leadership while the entry was in flight), so they say
// nothing.
func CommitOutcome(code int16) Outcome {
	if code == 0 {
		return OK
	}
	switch kerr.ErrorForCode(code) {
	case kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress,
		kerr.FencedInstanceID, kerr.StaleMemberEpoch, kerr.UnknownTopicOrPartition,
		kerr.InvalidGroupID, kerr.OffsetMetadataTooLarge, kerr.InvalidCommitOffsetSize,
		kerr.GroupAuthorizationFailed, kerr.TopicAuthorizationFailed,
		kerr.CoordinatorLoadInProgress, kerr.GroupIDNotFound, kerr.UnsupportedVersion:
		return Failed
	}
	return Unknown
}
