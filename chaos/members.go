package chaos

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is one franz-go consumer group member. It commits the partitions
// it owns with its member id and generation, as a consumer does after
// processing, and records every assignment it receives (whole, from the
// SyncGroup answer) and every partition it gives up.
type member struct {
	w           *Workload
	group       string
	instance    string // static members' group.instance.id; "" for dynamic ones
	cooperative bool
	// kip848 members run the consumer protocol (kgo.ServerSideBalancer)
	// and ask the server for the assignor named assignor ("uniform" or
	// "range").
	kip848   bool
	assignor string
	client   int // the porcupine client id of its commits

	cl     atomic.Pointer[kgo.Client] // set once, after kgo.NewClient; franz-go may call the balancer before
	mu     sync.Mutex
	owned  []int32
	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool
}

// recordingBalancer wraps a balancer to see the whole assignment a member
// receives in each generation: franz-go parses every SyncGroup answer
// through ParseSyncAssignment, after storing the generation of the join.
type recordingBalancer struct {
	kgo.GroupBalancer
	m *member
}

func (b recordingBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	parsed, err := b.GroupBalancer.ParseSyncAssignment(assignment)
	cl := b.m.cl.Load()
	if err != nil || cl == nil {
		return parsed, err
	}
	id, gen := cl.GroupMetadata()
	ps := slices.Clone(parsed[b.m.w.cfg.Topic])
	slices.Sort(ps)
	b.m.w.hist.addSync(SyncRecord{
		Group: b.m.group, Member: id, Instance: b.m.instance, Generation: gen,
		Partitions: ps, At: b.m.w.hist.Now(), Cooperative: b.m.cooperative,
	})
	return parsed, nil
}

// balancer is what the member's client balances with: a classic member
// records every assignment it parses; a KIP-848 member gets the balancer
// itself, since franz-go runs the consumer protocol only with its own
// range or sticky balancer (and parses no assignment: the assignment
// callback records it).
func (m *member) balancer(b kgo.GroupBalancer) kgo.GroupBalancer {
	if m.kip848 {
		return b
	}
	return recordingBalancer{b, m}
}

// start creates the client, which joins the group at once, and runs the
// member's poll and commit loops until close.
func (m *member) start() error {
	// franz-go asks for the uniform server assignor with its sticky
	// balancer, for range with its range balancer.
	var balancer kgo.GroupBalancer = kgo.RangeBalancer()
	if m.cooperative && (!m.kip848 || m.assignor == "uniform") {
		balancer = kgo.CooperativeStickyBalancer()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(m.w.cfg.Brokers...),
		kgo.ClientID("kcoord-verify"),
		kgo.ConsumerGroup(m.group),
		kgo.ConsumeTopics(m.w.cfg.Topic),
		kgo.Balancers(m.balancer(balancer)),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(m.w.cfg.SessionTimeout),
		kgo.HeartbeatInterval(m.w.cfg.SessionTimeout / 6),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
		kgo.FetchMaxWait(time.Second),
		// franz-go retries a commit that met NOT_COORDINATOR or a closed
		// connection with the same request: it could land twice inside
		// one recorded operation, and the answer recorded would be the
		// last attempt's. One attempt per commit, as the raw clients.
		kgo.RetryTimeoutFn(func(key int16) time.Duration {
			switch key {
			case kmsg.OffsetCommit.Int16():
				return time.Nanosecond
			case kmsg.JoinGroup.Int16(), kmsg.SyncGroup.Int16(), kmsg.Heartbeat.Int16():
				return m.w.cfg.SessionTimeout
			}
			return 30 * time.Second
		}),
	}
	if m.instance != "" {
		opts = append(opts, kgo.InstanceID(m.instance))
	}
	if m.kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	// An assignment parsed before this store is not recorded; the first
	// join takes a round trip more than this.
	m.cl.Store(cl)
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go m.run()
	return nil
}

func (m *member) assigned(_ context.Context, cl *kgo.Client, added map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range added[m.w.cfg.Topic] {
		if !slices.Contains(m.owned, p) {
			m.owned = append(m.owned, p)
		}
	}
	if ps := added[m.w.cfg.Topic]; m.kip848 && len(ps) > 0 {
		// A consumer-protocol member is handed partitions in heartbeat
		// answers, not in a SyncGroup: the callback is the assignment.
		id, epoch := cl.GroupMetadata()
		m.w.hist.addAssign(AssignRecord{Group: m.group, Member: id, Epoch: epoch, Partitions: slices.Sorted(slices.Values(ps)), At: m.w.hist.Now()})
	}
}

func (m *member) revoked(_ context.Context, cl *kgo.Client, gone map[string][]int32) {
	m.release(cl, gone, false)
}

func (m *member) lost(_ context.Context, cl *kgo.Client, gone map[string][]int32) {
	m.release(cl, gone, true)
}

func (m *member) release(cl *kgo.Client, gone map[string][]int32, lost bool) {
	m.mu.Lock()
	ps := gone[m.w.cfg.Topic]
	m.owned = slices.DeleteFunc(m.owned, func(p int32) bool { return slices.Contains(ps, p) })
	m.mu.Unlock()
	if len(ps) == 0 {
		return
	}
	id, gen := cl.GroupMetadata()
	m.w.hist.addRelease(Release{Group: m.group, Member: id, Generation: gen,
		Partitions: slices.Clone(ps), Lost: lost, At: m.w.hist.Now()})
}

// run polls (franz-go delivers rebalance callbacks from polls too) and
// commits what the member owns every CommitInterval.
func (m *member) run() {
	defer close(m.done)
	cl := m.cl.Load()
	go func() {
		for {
			fs := cl.PollFetches(m.w.ctx)
			if fs.IsClientClosed() || m.w.ctx.Err() != nil {
				return
			}
			select {
			case <-m.stop:
				return
			default:
			}
		}
	}()
	tick := time.NewTicker(m.w.cfg.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-m.w.ctx.Done():
			return
		case <-tick.C:
		}
		if !m.w.beginCommit() {
			continue
		}
		m.commitOwned()
		m.w.endCommit()
	}
}

// commitOwned commits a fresh offset for every owned partition, in one
// OffsetCommit as franz-go sends it, and records one operation per
// partition.
func (m *member) commitOwned() {
	m.mu.Lock()
	owned := slices.Clone(m.owned)
	m.mu.Unlock()
	if len(owned) == 0 {
		return
	}
	topic := m.w.cfg.Topic
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	values := map[int32]int64{}
	for _, p := range owned {
		v := m.w.nextValue()
		values[p] = v
		offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: v}
	}
	call := m.w.hist.Now()
	ctx, cancel := context.WithTimeout(m.w.ctx, m.w.cfg.OpTimeout)
	defer cancel()
	var (
		req  *kmsg.OffsetCommitRequest
		resp *kmsg.OffsetCommitResponse
		err  error
	)
	m.cl.Load().CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, rq *kmsg.OffsetCommitRequest, rs *kmsg.OffsetCommitResponse, e error) {
		req, resp, err = rq, rs, e
	})
	ret := m.w.hist.Now()
	codes := map[int32]int16{}
	if resp != nil {
		for i, t := range resp.Topics {
			// OffsetCommit v10 answers by topic id, with no name: match
			// by position then.
			if t.Topic != topic && (t.Topic != "" || req == nil || i >= len(req.Topics) || req.Topics[i].Topic != topic) {
				continue
			}
			for _, p := range t.Partitions {
				codes[p.Partition] = p.ErrorCode
			}
		}
	}
	memberID, gen := "", int32(-1)
	sent := map[int32]bool{}
	if req != nil {
		memberID, gen = req.MemberID, req.Generation
		for _, t := range req.Topics {
			if t.Topic == topic {
				for _, p := range t.Partitions {
					sent[p.Partition] = true
				}
			}
		}
	}
	for p, v := range values {
		op := Op{Client: m.client, Kind: Commit, Register: Register{m.group, topic, p}, Value: v,
			Call: call, Return: ret, Member: memberID, Generation: gen}
		code, answered := codes[p]
		switch {
		case !sent[p]:
			// franz-go did not send it: the group is between
			// generations, or the client is closing.
			op.Outcome = Failed
		case err != nil || !answered:
			op.Outcome = Unknown
			if err != nil {
				op.Err = err.Error()
			}
		default:
			op.Outcome = CommitOutcome(code)
		}
		m.w.hist.addOp(op)
	}
}

// close leaves the group (a static member just goes away, as Kafka's
// static members do) and waits for the member's loops. The leave is
// bounded: a JoinGroup in flight against a faulted cluster may otherwise
// hold it for the whole rebalance timeout.
func (m *member) close() {
	if m.closed.Swap(true) {
		return
	}
	close(m.stop)
	cl := m.cl.Load()
	ctx, cancel := context.WithTimeout(context.Background(), m.w.cfg.OpTimeout)
	_ = cl.LeaveGroupContext(ctx)
	cancel()
	cl.Close()
	<-m.done
}
