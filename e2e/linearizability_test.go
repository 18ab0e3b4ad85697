package e2e

import (
	"context"
	"errors"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/server"
	"github.com/kcoord/kcoord/transport"
)

// TestCommitsAndFetchesAreLinearizableAcrossFailover runs concurrent
// OffsetCommits and OffsetFetches of one partition against a three-node
// cluster while the shard's leader is killed, and checks the history with
// porcupine against a register: every fetch sees the latest acknowledged
// commit (or one that was in flight). A commit whose answer was lost may
// have happened or not; porcupine is told so.
func TestCommitsAndFetchesAreLinearizableAcrossFailover(t *testing.T) {
	t.Parallel()
	servers := server.StartTestCluster(t, 3, nil)
	const group, topic = "linearizable-group", "t"
	var killed atomic.Int32
	killed.Store(-1)
	seeds := func() []string {
		var out []string
		for i, s := range servers {
			if int32(i) != killed.Load() {
				out = append(out, s.KafkaAddr().String())
			}
		}
		return out
	}

	ctx := testContext(t, 60*time.Second)
	createTopic(ctx, t, newAdmin(t, servers[0].KafkaAddr().String()), topic, 1)
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		next    atomic.Int64
	)
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for client := range 4 {
		wg.Go(func() {
			c := &registerClient{group: group, topic: topic}
			defer c.close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				write := (client+i)%2 == 0
				value := next.Add(1)
				call := time.Since(start).Nanoseconds()
				got, err := c.do(ctx, seeds(), write, value)
				ret := time.Since(start).Nanoseconds()
				switch {
				case err == nil && write:
					record(porcupine.Operation{ClientId: client, Input: regInput{write: true, value: value}, Call: call, Return: ret})
				case err == nil:
					record(porcupine.Operation{ClientId: client, Input: regInput{}, Output: got, Call: call, Return: ret})
				case write && !errors.Is(err, errNotSent):
					// The commit may still land: it takes effect some
					// time after its call, or never.
					record(porcupine.Operation{ClientId: client, Input: regInput{write: true, value: value}, Call: call, Return: math.MaxInt64})
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(time.Second)
	leader, ok := servers[0].Node().LeaderOf(servers[0].ShardFor(group))
	if !ok {
		t.Fatal("no leader for the group's shard")
	}
	victim := int32(leader.NodeID - 1)
	killed.Store(victim)
	if err := servers[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	model := porcupine.Model{
		Init: func() any { return int64(-1) },
		Step: func(state, input, output any) (bool, any) {
			in := input.(regInput)
			if in.write {
				return true, in.value
			}
			return output.(int64) == state.(int64), state
		},
	}
	reads, ambiguous := 0, 0
	for _, op := range history {
		if !op.Input.(regInput).write {
			reads++
		}
		if op.Return == math.MaxInt64 {
			ambiguous++
		}
	}
	t.Logf("%d commits may or may not have happened (their answer was lost)", ambiguous)
	t.Logf("%d operations (%d reads) across the kill of node %d", len(history), reads, victim+1)
	if reads < 20 {
		t.Fatalf("too few reads completed (%d) to say anything", reads)
	}
	if res := porcupine.CheckOperationsTimeout(model, history, 30*time.Second); res != porcupine.Ok {
		t.Fatalf("history is not linearizable: %v", res)
	}
}

type regInput struct {
	write bool
	value int64
}

// errNotSent marks a request that surely did not reach a coordinator.
var errNotSent = errors.New("not sent")

// registerClient commits (writes) and fetches (reads) one partition's
// offset, following the coordinator as it moves.
type registerClient struct {
	group, topic string
	conn         *transport.RawClient
}

func (c *registerClient) close() {
	if c.conn != nil {
		c.conn.Close()
	}
}

func (c *registerClient) do(ctx context.Context, seeds []string, write bool, value int64) (int64, error) {
	// As long as a real client waits (kafka-go 5s, franz-go and sarama
	// longer), and past kcoord's hold of a request while a shard elects: a
	// shorter timeout turns every held commit into one that may or may not
	// have happened.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c.conn == nil {
		if err := c.connect(ctx, seeds); err != nil {
			return 0, errNotSent
		}
	}
	var (
		resp kmsg.Response
		err  error
	)
	if write {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = c.group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = c.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = value
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		req.SetVersion(8)
		resp, err = c.conn.Do(ctx, req)
	} else {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = c.group
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = c.topic, []int32{0}
		rg.Topics = append(rg.Topics, gt)
		req.Groups = append(req.Groups, rg)
		req.SetVersion(8)
		resp, err = c.conn.Do(ctx, req)
	}
	if err != nil {
		c.close()
		c.conn = nil
		return 0, err
	}
	var code int16
	var got int64
	if write {
		code = resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	} else {
		g := resp.(*kmsg.OffsetFetchResponse).Groups[0]
		code = g.ErrorCode
		if code == 0 {
			got = g.Topics[0].Partitions[0].Offset
		}
	}
	if err := kerr.ErrorForCode(code); err != nil {
		c.close()
		c.conn = nil
		if errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
			errors.Is(err, kerr.UnknownTopicOrPartition) {
			// Refused before anything was written (the last: the
			// coordinator has not yet applied the topic's creation).
			return 0, errNotSent
		}
		return 0, err
	}
	return got, nil
}

// connect finds the group's coordinator through any seed and dials it.
func (c *registerClient) connect(ctx context.Context, seeds []string) error {
	for _, seed := range seeds {
		conn, err := transport.Dial(ctx, seed)
		if err != nil {
			continue
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = c.group
		req.SetVersion(3)
		resp, err := conn.Do(ctx, req)
		conn.Close()
		if err != nil {
			continue
		}
		fc := resp.(*kmsg.FindCoordinatorResponse)
		if fc.ErrorCode != 0 {
			continue
		}
		if c.conn, err = transport.Dial(ctx, net.JoinHostPort(fc.Host, strconv.Itoa(int(fc.Port)))); err == nil {
			return nil
		}
	}
	return errors.New("no coordinator reachable")
}
