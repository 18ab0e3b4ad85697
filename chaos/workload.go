package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WorkloadConfig shapes the load. Zero fields take the defaults of
// DefaultWorkloadConfig (see Validate).
type WorkloadConfig struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Prefix starts every group name, so runs do not meet; empty: a
	// random one.
	Prefix string
	// Topic is the topic every group consumes; it is created with
	// Partitions partitions if it does not exist.
	Topic      string
	Partitions int32
	// Groups is how many franz-go consumer groups run: they alternate
	// between the eager range balancer and the cooperative-sticky one, and
	// the first member of every other group is static.
	Groups int
	// KIP848Groups is how many more franz-go groups run the consumer
	// protocol (KIP-848, kgo.ServerSideBalancer): they alternate between
	// the uniform server assignor (cooperative-sticky) and range, and the
	// first member of every other one is static.
	KIP848Groups int
	// Members is how many members each consumer group has.
	Members int
	// RegisterGroups are simple-consumer groups whose first
	// RegisterPartitions partitions raw committers write and raw fetchers
	// read; Workers is how many raw clients there are in all.
	RegisterGroups     int
	RegisterPartitions int32
	Workers            int
	// ColdGroups are simple-consumer groups whose registers are committed
	// once at the start and only read afterwards, like the offsets of the
	// many idle groups of a real cluster: an offset lost later can never
	// be hidden by a newer commit.
	ColdGroups int
	// CommitInterval is how often a member commits what it owns.
	CommitInterval time.Duration
	// Churn is how often a member joins or leaves a group, or a static
	// member restarts (0: never).
	Churn time.Duration
	// SessionTimeout is the members' session.timeout.ms.
	SessionTimeout time.Duration
	// OpTimeout bounds every operation; past it the outcome is unknown.
	OpTimeout time.Duration
	// Logger gets the workload's events; nil: none.
	Logger hclog.Logger
}

// DefaultWorkloadConfig is a load a three-node cluster on two cores
// carries comfortably: four classic groups and two KIP-848 groups of
// three members, two register groups of two partitions under four raw
// clients.
func DefaultWorkloadConfig() WorkloadConfig {
	return WorkloadConfig{
		Topic: "kcoord-verify", Partitions: 6,
		Groups: 4, KIP848Groups: 2, Members: 3,
		RegisterGroups: 2, RegisterPartitions: 2, Workers: 4, ColdGroups: 4,
		CommitInterval: 250 * time.Millisecond,
		Churn:          10 * time.Second,
		SessionTimeout: 10 * time.Second,
		OpTimeout:      6 * time.Second,
	}
}

// ErrNoBrokers is returned for a config without seed brokers.
var ErrNoBrokers = errors.New("chaos: no seed brokers")

// Validate fills defaults and checks the config.
func (c *WorkloadConfig) Validate() error {
	d := DefaultWorkloadConfig()
	if len(c.Brokers) == 0 {
		return ErrNoBrokers
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("kcoord-verify-%06x", rand.Uint32()&0xffffff)
	}
	if c.Topic == "" {
		c.Topic = d.Topic
	}
	if c.Partitions <= 0 {
		c.Partitions = d.Partitions
	}
	if c.Groups < 0 || c.KIP848Groups < 0 || c.Members <= 0 && c.Groups+c.KIP848Groups > 0 {
		return fmt.Errorf("chaos: %d classic and %d KIP-848 groups of %d members", c.Groups, c.KIP848Groups, c.Members)
	}
	switch {
	case c.RegisterGroups+c.ColdGroups == 0:
		c.Workers = 0
	case c.Workers <= 0:
		c.Workers = d.Workers
	}
	if c.RegisterPartitions <= 0 {
		c.RegisterPartitions = d.RegisterPartitions
	}
	c.RegisterPartitions = min(c.RegisterPartitions, c.Partitions)
	if c.CommitInterval <= 0 {
		c.CommitInterval = d.CommitInterval
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = d.SessionTimeout
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = d.OpTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return nil
}

// Workload runs the load and records it into a History. Start it, let
// the run go on (faults or not), then StopLoad, Settle and Close. Its
// methods are called from one goroutine (the run's); its clients run in
// goroutines of their own.
type Workload struct {
	cfg  WorkloadConfig
	hist *History
	ctx  context.Context

	cancel  context.CancelFunc
	value   atomic.Int64
	stopped atomic.Bool
	// loadMu is held shared by every member commit in flight and taken
	// by StopLoad, so the final reads begin after the last commit.
	loadMu  sync.RWMutex
	stopCh  chan struct{} // closed by StopLoad
	stopOne sync.Once
	wg      sync.WaitGroup

	mu      sync.Mutex
	members map[string][]*member // by group
	nextID  int

	// probe is what Start learned of the server's consumer protocol (nil
	// without KIP-848 groups); when the server lacks it, Start skips the
	// skippedKIP848 KIP-848 groups. Both are set before any member starts.
	probe         *KIP848Probe
	skippedKIP848 int
}

// NewWorkload validates cfg and prepares a workload recording into hist.
func NewWorkload(cfg WorkloadConfig, hist *History) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Workload{cfg: cfg, hist: hist, members: map[string][]*member{}, stopCh: make(chan struct{})}, nil
}

// Config is the validated config.
func (w *Workload) Config() WorkloadConfig { return w.cfg }

// nextValue is the next offset to commit: unique and increasing across
// every client, so a value names the one commit that wrote it.
func (w *Workload) nextValue() int64 { return w.value.Add(1) }

func (w *Workload) loadStopped() bool { return w.stopped.Load() }

// beginCommit says whether a member may commit now; if so, endCommit
// must follow its commit.
func (w *Workload) beginCommit() bool {
	w.loadMu.RLock()
	if w.stopped.Load() {
		w.loadMu.RUnlock()
		return false
	}
	return true
}

func (w *Workload) endCommit() { w.loadMu.RUnlock() }

// ConsumerGroups are the names of the franz-go groups: the classic ones,
// then the KIP-848 ones (kip848 tells them apart by index).
func (w *Workload) ConsumerGroups() []string {
	var out []string
	for i := range w.cfg.Groups {
		out = append(out, fmt.Sprintf("%s-g%d", w.cfg.Prefix, i))
	}
	for i := range w.cfg.KIP848Groups {
		out = append(out, fmt.Sprintf("%s-k%d", w.cfg.Prefix, i))
	}
	return out
}

// kip848 reports whether the group at index gi of ConsumerGroups runs the
// consumer protocol.
func (w *Workload) kip848(gi int) bool { return gi >= w.cfg.Groups }

// serverAssignor is the server assignor the members of the group at
// index gi of ConsumerGroups ask for: "uniform" and "range" in turn among
// the KIP-848 groups, "" for a classic group.
func (w *Workload) serverAssignor(gi int) string {
	switch {
	case !w.kip848(gi):
		return ""
	case (gi-w.cfg.Groups)%2 == 0:
		return "uniform"
	}
	return "range"
}

// RegisterGroups are the names of the raw committers' groups.
func (w *Workload) RegisterGroups() []string {
	var out []string
	for i := range w.cfg.RegisterGroups {
		out = append(out, fmt.Sprintf("%s-r%d", w.cfg.Prefix, i))
	}
	return out
}

// ColdGroups are the names of the groups committed once and then only
// read.
func (w *Workload) ColdGroups() []string {
	var out []string
	for i := range w.cfg.ColdGroups {
		out = append(out, fmt.Sprintf("%s-c%d", w.cfg.Prefix, i))
	}
	return out
}

// cooperative reports whether the members of the group at index gi are
// cooperative: every other classic group, every KIP-848 group (the
// consumer protocol revokes incrementally).
func (w *Workload) cooperative(gi int) bool { return w.kip848(gi) || gi%2 == 1 }

// Start creates the topic, probes the server's consumer protocol when
// KIP-848 groups are to run, then starts the raw clients, every member and
// the churn. ctx bounds the whole run.
func (w *Workload) Start(ctx context.Context) error {
	w.ctx, w.cancel = context.WithCancel(ctx)
	if err := w.createTopic(ctx); err != nil {
		return err
	}
	w.probeConsumerProtocol(ctx)
	if err := w.commitCold(ctx); err != nil {
		return err
	}
	for i := range w.cfg.Workers {
		w.wg.Go(func() { w.rawWorker(i) })
	}
	for gi, g := range w.ConsumerGroups() {
		for mi := range w.cfg.Members {
			instance := ""
			if gi%2 == 0 && mi == 0 {
				instance = fmt.Sprintf("%s-static", g)
			}
			if err := w.addMember(gi, g, instance); err != nil {
				return err
			}
		}
	}
	if w.cfg.Churn > 0 && len(w.ConsumerGroups()) > 0 {
		w.wg.Go(w.churn)
	}
	return nil
}

// createTopic creates the topic, retrying while the cluster is not ready
// (kcoord answers NOT_CONTROLLER on nodes that do not lead its metadata).
func (w *Workload) createTopic(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.cfg.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		resp, err := adm.CreateTopic(ctx, w.cfg.Partitions, 1, nil, w.cfg.Topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return w.usePartitions(ctx, adm)
		}
		w.cfg.Logger.Debug("create topic", "topic", w.cfg.Topic, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: create topic %s: %w", w.cfg.Topic, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// probeConsumerProtocol probes the server assignors the KIP-848 groups
// will ask for. A server that does not run the consumer protocol at all
// lacks an optional feature (Kafka 3.x, and servers that only speak the
// classic protocol): its KIP-848 groups are skipped, with a warning, since
// franz-go would quietly run them as classic groups. Any other finding is
// kept for CheckLiveness to quote.
func (w *Workload) probeConsumerProtocol(ctx context.Context) {
	if w.cfg.KIP848Groups == 0 {
		return
	}
	assignors := []string{"uniform"}
	if w.cfg.KIP848Groups > 1 {
		assignors = append(assignors, "range")
	}
	p := probeKIP848(ctx, w.cfg, assignors)
	w.probe = &p
	if p.Absent != "" {
		w.cfg.Logger.Warn("server does not run the consumer protocol: skipping the KIP-848 groups",
			"groups", w.cfg.KIP848Groups, "reason", p.Absent)
		w.skippedKIP848, w.cfg.KIP848Groups = w.cfg.KIP848Groups, 0
		return
	}
	for _, a := range assignors {
		if why := p.Assignors[a]; why != "" {
			w.cfg.Logger.Warn("server assignor probe failed", "assignor", a, "finding", why)
		}
	}
}

// kip848Cause is what the probe found about the server assignor of the
// KIP-848 group at index gi, phrased to follow a liveness problem; "" when
// the probe found nothing wrong.
func (w *Workload) kip848Cause(gi int) string {
	if w.probe == nil || !w.kip848(gi) {
		return ""
	}
	why := w.probe.Assignors[w.serverAssignor(gi)]
	if why == "" {
		return ""
	}
	return fmt.Sprintf("before the run, a lone member asking for server assignor %q did not get the %d partitions of %s: %s",
		w.serverAssignor(gi), w.cfg.Partitions, w.cfg.Topic, why)
}

// commitCold commits every cold register once, retrying until the commit
// is acknowledged.
func (w *Workload) commitCold(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i, g := range w.ColdGroups() {
		c := &rawClient{seeds: w.cfg.Brokers, timeout: w.cfg.OpTimeout, group: g}
		for p := range w.cfg.RegisterPartitions {
			for w.rawCommit(c, 3_000_000+i, Register{g, w.cfg.Topic, p}) != OK {
				if ctx.Err() != nil {
					c.close()
					return fmt.Errorf("chaos: first commit of %s: %w", g, ctx.Err())
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		c.close()
	}
	return nil
}

// usePartitions reads the partition count of a topic that already
// existed, so the groups' registers and the liveness check match it.
func (w *Workload) usePartitions(ctx context.Context, adm *kadm.Client) error {
	topics, err := adm.ListTopics(ctx, w.cfg.Topic)
	if err != nil {
		return fmt.Errorf("chaos: describe topic %s: %w", w.cfg.Topic, err)
	}
	t, ok := topics[w.cfg.Topic]
	if !ok || t.Err != nil || len(t.Partitions) == 0 {
		return fmt.Errorf("chaos: topic %s exists but its partitions are unknown: %v", w.cfg.Topic, t.Err)
	}
	if n := int32(len(t.Partitions)); n != w.cfg.Partitions {
		w.cfg.Logger.Info("topic exists: using its partitions", "topic", w.cfg.Topic, "partitions", n)
		w.cfg.Partitions = n
		w.cfg.RegisterPartitions = min(w.cfg.RegisterPartitions, n)
	}
	return nil
}

func (w *Workload) addMember(gi int, group, instance string) error {
	w.mu.Lock()
	w.nextID++
	m := &member{w: w, group: group, instance: instance, cooperative: w.cooperative(gi), kip848: w.kip848(gi),
		assignor: w.serverAssignor(gi), client: 1_000_000 + w.nextID}
	w.mu.Unlock()
	if err := m.start(); err != nil {
		return err
	}
	w.mu.Lock()
	w.members[group] = append(w.members[group], m)
	w.mu.Unlock()
	return nil
}

// churn changes one random group every Churn. A static member goes away
// and comes back under its instance id, as a restarted static consumer
// does (no rebalance). Otherwise the group shrinks by a dynamic member or
// grows by a new one, keeping within one of Members: a cooperative group
// that grows moves partitions between members that stay, which is what
// the revoke-before-reassign check needs.
func (w *Workload) churn() {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	t := time.NewTicker(w.cfg.Churn)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.stopCh:
			return
		case <-t.C:
		}
		gi := rng.IntN(len(w.ConsumerGroups()))
		g := w.ConsumerGroups()[gi]
		w.mu.Lock()
		ms := w.members[g]
		n := len(ms)
		grow := n <= max(1, w.cfg.Members-1) || n <= w.cfg.Members && rng.IntN(2) == 0
		var victim *member
		if !grow && n > 0 {
			i := rng.IntN(n)
			victim = ms[i]
			w.members[g] = append(ms[:i:i], ms[i+1:]...)
		}
		w.mu.Unlock()
		w.hist.addChurn()
		switch {
		case victim == nil:
			w.cfg.Logger.Debug("member added", "group", g)
			if err := w.addMember(gi, g, ""); err != nil {
				w.cfg.Logger.Warn("member could not join", "group", g, "error", err)
			}
		case victim.instance != "":
			victim.close()
			w.cfg.Logger.Debug("static member restarted", "group", g, "instance", victim.instance)
			if err := w.addMember(gi, g, victim.instance); err != nil {
				w.cfg.Logger.Warn("static member could not rejoin", "group", g, "error", err)
			}
		default:
			victim.close()
			w.cfg.Logger.Debug("member left", "group", g)
		}
	}
}

// rawWorker commits and fetches random registers of the register groups
// until the load stops.
func (w *Workload) rawWorker(id int) {
	rng := rand.New(rand.NewPCG(uint64(id), rand.Uint64()))
	clients := map[string]*rawClient{}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	hot, cold, consumers := w.RegisterGroups(), w.ColdGroups(), w.ConsumerGroups()
	for !w.loadStopped() && w.ctx.Err() == nil {
		// Half the operations use a hot register, a quarter read a cold
		// one, a quarter read what a consumer group's members committed.
		groups, partitions, write := hot, w.cfg.RegisterPartitions, rng.IntN(2) == 0
		switch r := rng.IntN(4); {
		case r == 0 && len(cold) > 0 || len(hot) == 0 && len(consumers) == 0:
			groups, write = cold, false
		case r == 1 && len(consumers) > 0 || len(hot) == 0:
			groups, partitions, write = consumers, w.cfg.Partitions, false
		}
		g := groups[rng.IntN(len(groups))]
		c := clients[g]
		if c == nil {
			c = &rawClient{seeds: w.cfg.Brokers, timeout: w.cfg.OpTimeout, group: g}
			clients[g] = c
		}
		reg := Register{g, w.cfg.Topic, rng.Int32N(partitions)}
		if write {
			w.rawCommit(c, id, reg)
		} else {
			w.rawFetch(w.ctx, c, id, reg, false)
		}
		time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
	}
}

func (w *Workload) rawCommit(c *rawClient, client int, reg Register) Outcome {
	v := w.nextValue()
	op := Op{Client: client, Kind: Commit, Register: reg, Value: v, Generation: -1, Call: w.hist.Now()}
	outcome, err := c.commit(w.ctx, reg.Topic, reg.Partition, v)
	op.Return, op.Outcome = w.hist.Now(), outcome
	if err != nil {
		op.Err = err.Error()
	}
	w.hist.addOp(op)
	return outcome
}

func (w *Workload) rawFetch(ctx context.Context, c *rawClient, client int, reg Register, final bool) error {
	op := Op{Client: client, Kind: Fetch, Register: reg, Generation: -1, Call: w.hist.Now(), Final: final}
	v, err := c.fetch(ctx, reg.Topic, reg.Partition)
	op.Return = w.hist.Now()
	if err != nil {
		op.Outcome, op.Err = Unknown, err.Error()
	} else {
		op.Outcome, op.Value = OK, v
	}
	w.hist.addOp(op)
	return err
}

// StopLoad stops the raw clients, the members' commits and the churn, and
// waits for the operations in flight. Members stay in their groups.
func (w *Workload) StopLoad() {
	w.loadMu.Lock() // waits for the members' commits in flight
	w.stopped.Store(true)
	w.loadMu.Unlock()
	w.stopOne.Do(func() { close(w.stopCh) })
	w.wg.Wait()
}

// Registers lists every register the workload wrote: each register
// group's partitions and every partition of every consumer group.
func (w *Workload) Registers() []Register {
	var out []Register
	for _, g := range append(w.RegisterGroups(), w.ColdGroups()...) {
		for p := range w.cfg.RegisterPartitions {
			out = append(out, Register{g, w.cfg.Topic, p})
		}
	}
	for _, g := range w.ConsumerGroups() {
		for p := range w.cfg.Partitions {
			out = append(out, Register{g, w.cfg.Topic, p})
		}
	}
	return out
}

// FinalReads fetches every register once more, after the faults healed
// and the load stopped, retrying each until it is answered or ctx ends.
// The durability checker compares these reads with the acknowledged
// commits.
func (w *Workload) FinalReads(ctx context.Context) error {
	var errs []error
	for i, reg := range w.Registers() {
		c := &rawClient{seeds: w.cfg.Brokers, timeout: w.cfg.OpTimeout, group: reg.Group}
		for {
			err := w.rawFetch(ctx, c, 2_000_000+i, reg, true)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("final read of %s/%d: %w", reg.Group, reg.Partition, err))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.close()
	}
	return errors.Join(errs...)
}

// Members is how many members run in each consumer group now.
func (w *Workload) Members() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for g, ms := range w.members {
		out[g] = len(ms)
	}
	return out
}

// Close stops every member and client.
func (w *Workload) Close() {
	w.StopLoad()
	w.mu.Lock()
	var all []*member
	for _, ms := range w.members {
		all = append(all, ms...)
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range all {
		wg.Go(m.close)
	}
	wg.Wait()
	if w.cancel != nil {
		w.cancel()
	}
}
