package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The docker-compose cluster test: the FROM scratch image and
// docker-compose.yml at the module root, three containers, real clients on
// the host through the ports each node publishes on 127.0.0.1.
//
// Everything in this file is prefixed dc/docker so it cannot collide with
// the other tests' helpers in package e2e.
const (
	dockerImage = "kcoord:dev"
	// dockerNodes is the number of services in docker-compose.yml, kcoord1..3,
	// whose node ids are 1..3.
	dockerNodes = 3

	// dockerBuildBudget bounds building the static binary and the image;
	// dockerBudget bounds everything after it, cluster start to the last
	// check. Cleanup has its own budget.
	dockerBuildBudget   = 4 * time.Minute
	dockerBudget        = 4 * time.Minute
	dockerCleanupBudget = 2 * time.Minute

	// Client timings of the group: a 6s session (group.min.session.timeout.ms
	// of a default node) and heartbeats every 500ms.
	dockerSessionTimeout    = 6 * time.Second
	dockerHeartbeatInterval = 500 * time.Millisecond
	// dockerCommitRetryTimeout bounds how long one kgo request (heartbeats
	// included) is retried. franz-go may end a member's session sooner: a
	// heartbeat that met refused dials to the dead coordinator for about 2s
	// gave up (franz-go v1.22.3), and a group leader that rejoins forces a
	// rebalance, as in Kafka.
	dockerCommitRetryTimeout = 20 * time.Second

	// dockerHealthyWithin bounds cluster start and a node's restart;
	// dockerFailoverWithin how long after the kill the acknowledged offsets
	// must be readable and new commits accepted; dockerBalancedWithin how
	// long after the restarted node is healthy shard leadership must be
	// balanced again.
	dockerHealthyWithin  = 90 * time.Second
	dockerFailoverWithin = 45 * time.Second
	dockerBalancedWithin = 60 * time.Second
)

// TestDockerCluster starts the three-node docker-compose cluster, runs a
// franz-go consumer group against it through the published Kafka ports,
// SIGKILLs the container coordinating the group and checks what users rely
// on: every acknowledged commit is readable through the survivors, the
// members keep their member ids and generation (no rebalance: no revoke or
// lost callback, no rejoin, no heartbeat error), and the group takes new
// commits soon (the time is logged). Then it starts the killed container
// again and waits for shard leadership to be balanced: every node's
// kcoord_shards_led within one of the others'.
//
// It needs a Docker engine and docker-compose (or the compose plugin); it
// is skipped without them and with -short. It builds a static bin/kcoord
// into a temporary build context and tags the image kcoord:dev (what
// `make image` builds), runs the cluster as its own compose project on free
// host ports, and removes the project's containers, network and volumes
// when it ends, passed or failed.
func TestDockerCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("docker-compose cluster test skipped in -short mode")
	}
	dc := newDockerCompose(t) // skips without Docker
	dc.buildImage(t)

	ctx := testContext(t, dockerBudget)
	dc.up(ctx, t)
	dc.waitHealthy(ctx, t, dockerHealthyWithin, dc.nodes...)
	dc.logShardsLed(ctx, t, "after start")
	// The bootstrap's leadership balancing settles first, so the kill below
	// hits a cluster in its steady state.
	dc.waitBalanced(ctx, t, dockerBalancedWithin)
	dc.checkVersionAndFeatures(ctx, t)

	seeds := dc.kafkaAddrs(dc.nodes...)
	adm := dcAdminSeeds(t, seeds)
	topic, group := "docker-topic", fmt.Sprintf("docker-group-%d", rand.IntN(1e6))
	createTopic(ctx, t, adm, topic, groupPartitions)

	events := &dcGroupEvents{}
	t.Cleanup(func() { events.writeDebugOnFailure(t, dc.project) })
	members, before := dcStartGroup(ctx, t, adm, seeds, group, topic, events)
	eventMark := events.mark()
	t.Logf("group %s Stable: %v", group, before)

	// Acknowledged commits, round after round; kgo commits the member id as
	// each offset's metadata.
	want := map[string]map[int32]committed{topic: {}}
	commitRound := func(round int) { dcCommitRound(ctx, t, members, topic, round, want) }
	for round := range 3 {
		commitRound(round)
	}
	checkOffsets(ctx, t, adm, group, want)

	// The group's coordinator is the node to kill.
	coord := adm.FindGroupCoordinators(ctx, group)[group]
	if coord.Err != nil {
		t.Fatalf("find coordinator of %s: %v (%s)", group, coord.Err, coord.ErrMessage)
	}
	victim := dc.nodeByID(t, coord.NodeID)
	if got, want := net.JoinHostPort(coord.Host, strconv.Itoa(int(coord.Port))), victim.kafkaAddr(); got != want {
		t.Errorf("coordinator %d advertised as %s, want its published address %s", coord.NodeID, got, want)
	}
	var survivors []*dcNode
	for _, n := range dc.nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	dc.logShardsLed(ctx, t, "before the kill")

	t.Logf("SIGKILL %s (node %d), coordinator of %s", victim.service, victim.id, group)
	killed := time.Now()
	dc.kill(ctx, t, victim)

	// Every acknowledged commit, read through the survivors only.
	failCtx, cancel := context.WithTimeout(ctx, dockerFailoverWithin)
	defer cancel()
	dc.waitOffsets(failCtx, t, "acknowledged offsets readable through the survivors", dockerFailoverWithin, survivors, group, want)
	t.Logf("acknowledged offsets readable through the survivors %v after the kill", time.Since(killed).Round(time.Millisecond))

	// New commits in the same generation, as soon as the shard has a new
	// leader. Errors that mean the member lost its generation fail the test;
	// the others (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, timeouts,
	// refused connections) are the failover and are retried.
	const afterRound = 9
	for i, m := range members {
		memberID, _ := m.cl.GroupMetadata()
		offsets := make(map[int32]int64)
		for _, p := range m.owned.list() {
			offsets[p] = commitOffsetFor(i, p, afterRound)
		}
		var lastErr error
		for attempt := 0; ; attempt++ {
			lastErr = m.commit(failCtx, topic, offsets)
			if lastErr == nil {
				break
			}
			if dcGenerationLost(lastErr) {
				t.Errorf("member %d commit after the failover: %v (the failover cost the member its generation)", i, lastErr)
				break
			}
			if failCtx.Err() != nil {
				t.Fatalf("member %d: no commit accepted within %v of the kill: %v", i, dockerFailoverWithin, lastErr)
			}
			if attempt < 3 || attempt%20 == 0 {
				t.Logf("member %d commit after the failover, attempt %d, %v after the kill: %v (FindCoordinator answers: %s)",
					i, attempt, time.Since(killed).Round(time.Millisecond), lastErr, dc.coordinatorViews(failCtx, t, group, survivors))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if lastErr != nil {
			continue
		}
		if i == 0 {
			t.Logf("first commit accepted %v after the kill", time.Since(killed).Round(time.Millisecond))
		}
		for p, o := range offsets {
			want[topic][p] = committed{Offset: o, Metadata: memberID}
		}
	}
	t.Logf("all members' commits accepted %v after the kill", time.Since(killed).Round(time.Millisecond))
	dc.waitOffsets(failCtx, t, "new commits readable through the survivors", dockerFailoverWithin, survivors, group, want)
	dcPoll(failCtx, t, "the group Stable on its new coordinator with the same members", dockerFailoverWithin, 200*time.Millisecond, func(ctx context.Context) error {
		return dc.withAdmin(ctx, survivors, func(adm *kadm.Client) error {
			return checkGroup(ctx, adm, group, topic, groupPartitions, "range", kgoView(members))
		})
	})
	dcCheckNoRebalance(t, "the failover", before, dcSnapshot(members), events, eventMark)
	t.Logf("%s now coordinated by: %s", group, dc.coordinatorViews(ctx, t, group, survivors))
	dc.logShardsLed(ctx, t, "after the failover")

	// The killed node comes back on the same volume and takes its share of
	// shard leaderships again.
	restarted := time.Now()
	dc.start(ctx, t, victim)
	dc.waitHealthy(ctx, t, dockerHealthyWithin, victim)
	t.Logf("%s healthy again %v after docker start", victim.service, time.Since(restarted).Round(time.Millisecond))
	dc.waitBalanced(ctx, t, dockerBalancedWithin)

	// Leadership moved back onto the restarted node, by transfer: still no
	// rebalance, and every commit is still there.
	dc.waitOffsets(ctx, t, "every commit readable after leadership balancing", dockerFailoverWithin, dc.nodes, group, want)
	dcPoll(ctx, t, "the group Stable after leadership balancing", dockerFailoverWithin, 200*time.Millisecond, func(ctx context.Context) error {
		return dc.withAdmin(ctx, dc.nodes, func(adm *kadm.Client) error {
			return checkGroup(ctx, adm, group, topic, groupPartitions, "range", kgoView(members))
		})
	})
	t.Logf("%s now coordinated by: %s", group, dc.coordinatorViews(ctx, t, group, dc.nodes))
	dcCheckNoRebalance(t, "leadership balancing after the restart", before, dcSnapshot(members), events, eventMark)
}

// dcStartGroup starts three franz-go range members of group on topic, the
// i-th seeded at the i-th broker, with the compose tests' session and
// retry settings and events' logger and hooks, and returns once the group
// is Stable and stays so for three heartbeats, with its members' state
// then.
func dcStartGroup(ctx context.Context, t *testing.T, adm *kadm.Client, seeds []string, group, topic string, events *dcGroupEvents) ([]*kgoMember, []dcMemberState) {
	t.Helper()
	members := make([]*kgoMember, 3)
	for i := range members {
		name := fmt.Sprintf("kgo-%d", i)
		members[i] = startKgoMember(ctx, t, seeds[i], group, topic, i, kgo.RangeBalancer(),
			kgo.SeedBrokers(seeds...),
			kgo.SessionTimeout(dockerSessionTimeout),
			kgo.HeartbeatInterval(dockerHeartbeatInterval),
			kgo.RetryTimeout(dockerCommitRetryTimeout),
			kgo.WithLogger(events.logger(t, name)),
			kgo.WithHooks(events.hook(name)),
		)
	}
	waitFor(ctx, t, "three franz-go members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, "range", kgoView(members))
	})
	// Settle: a snapshot must not be taken in the middle of a rebalance a
	// late join started.
	before := dcSnapshot(members)
	time.Sleep(3 * dockerHeartbeatInterval)
	waitFor(ctx, t, "the group to stay Stable", func(ctx context.Context) error {
		if now := dcSnapshot(members); !slices.Equal(now, before) {
			before = now
			return fmt.Errorf("members changed while settling: %v", now)
		}
		return checkGroup(ctx, adm, group, topic, groupPartitions, "range", kgoView(members))
	})
	return members, before
}

// dcCommitRound has every member commit the partitions it owns for round
// (kgo commits the member id as each offset's metadata), failing t on an
// error, and records the acknowledged offsets in want.
func dcCommitRound(ctx context.Context, t *testing.T, members []*kgoMember, topic string, round int, want map[string]map[int32]committed) {
	t.Helper()
	for i, m := range members {
		memberID, _ := m.cl.GroupMetadata()
		offsets := make(map[int32]int64)
		for _, p := range m.owned.list() {
			offsets[p] = commitOffsetFor(i, p, round)
		}
		if err := m.commit(ctx, topic, offsets); err != nil {
			t.Fatalf("round %d: member %d commit: %v", round, i, err)
		}
		for p, o := range offsets {
			want[topic][p] = committed{Offset: o, Metadata: memberID}
		}
	}
}

// dcAdminSeeds is newAdmin with several seed brokers (newClient's options
// come after its own, so this SeedBrokers wins).
func dcAdminSeeds(t testing.TB, seeds []string) *kadm.Client {
	return kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
}

// dcMemberState is what a member knows of its place in the group.
type dcMemberState struct {
	MemberID   string
	Generation int32
	Callbacks  int64 // assigned, revoked and lost callbacks so far
}

func dcSnapshot(members []*kgoMember) []dcMemberState {
	out := make([]dcMemberState, len(members))
	for i, m := range members {
		id, gen := m.cl.GroupMetadata()
		out[i] = dcMemberState{MemberID: id, Generation: gen, Callbacks: m.callbacks.Load()}
	}
	return out
}

// dcCheckNoRebalance fails the test when a member's id, generation or
// callback count changed since before, or a member logged a group event
// (rejoin, revoke, heartbeat error, session loss) since mark.
func dcCheckNoRebalance(t *testing.T, cause string, before, after []dcMemberState, events *dcGroupEvents, mark int) {
	t.Helper()
	evs := events.since(mark)
	if clientGaveUp(evs) {
		// franz-go ends a classic member's session when its heartbeat
		// cannot even dial the dead coordinator; the member rejoins, and a
		// rejoining leader forces a rebalance (in Kafka as here). That is
		// the client's choice, not an error the cluster answered.
		t.Logf("a franz-go member gave up on the dead coordinator before the election ended (client behaviour); not checking for a rebalance:\n  %s", strings.Join(evs, "\n  "))
		return
	}
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("member %d changed across %s: %+v -> %+v (a rebalance or a lost session)", i, cause, before[i], after[i])
		}
	}
	if len(evs) > 0 {
		t.Errorf("group events since the group was Stable, by %s:\n  %s", cause, strings.Join(evs, "\n  "))
	}
}

// dcGenerationLost reports whether a commit error means the member is no
// longer in its generation.
func dcGenerationLost(err error) bool {
	for _, e := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress, kerr.FencedInstanceID} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// dcGroupEvents records, from every member's kgo logger and hooks, what
// only happens when a member leaves its generation: joins, revokes, heartbeat
// errors and errors that end a group session. It also keeps every
// member's debug lines (retries, coordinator lookups), written to a file
// only when the test fails.
type dcGroupEvents struct {
	mu     sync.Mutex
	events []string
	debug  []string
}

// writeDebugOnFailure writes the members' debug lines to a file named
// after project when t failed, and logs its path.
func (e *dcGroupEvents) writeDebugOnFailure(t *testing.T, project string) {
	if !t.Failed() {
		return
	}
	e.mu.Lock()
	out := strings.Join(e.debug, "\n") + "\n"
	e.mu.Unlock()
	path := filepath.Join(os.TempDir(), "kcoord-e2e-"+project+"-clients.log")
	if err := os.WriteFile(path, []byte(out), 0o644); err == nil {
		t.Logf("members' debug logs: %s", path)
	}
}

func (e *dcGroupEvents) addDebug(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.debug = append(e.debug, s)
}

// dcGroupEventMsgs are kgo's log messages (consumer_group.go, classic
// protocol) of a member leaving its generation or about to.
var dcGroupEventMsgs = []string{
	"joining group",
	"heartbeat errored",
	"eager consumer revoking",
	"calling onRevoke",
	"sync failed",
	"join returned",
	"triggering rejoin",
	"new group session begun",
}

func (e *dcGroupEvents) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, s)
}

func (e *dcGroupEvents) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.events)
}

func (e *dcGroupEvents) since(mark int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events[mark:])
}

// logger is a kgo logger at debug level that records group events and
// passes them, warnings and errors to the test log, with the time of day
// (to line them up with the nodes' logs); every line is kept for
// writeDebugOnFailure.
func (e *dcGroupEvents) logger(t testing.TB, name string) kgo.Logger {
	return &dcLogger{events: e, name: name, w: logWriter(t, name)}
}

func (e *dcGroupEvents) hook(name string) kgo.Hook {
	return dcManageErrHook(func(err error) {
		e.add(fmt.Sprintf("%s: %s group session ended: %v", name, time.Now().UTC().Format("15:04:05.000"), err))
	})
}

type dcManageErrHook func(error)

func (h dcManageErrHook) OnGroupManageError(err error) { h(err) }

type dcLogger struct {
	events *dcGroupEvents
	name   string
	w      io.Writer
}

func (l *dcLogger) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *dcLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] %s", time.Now().UTC().Format("15:04:05.000"), level, msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fmt.Fprintf(&b, "; %v: %v", keyvals[i], keyvals[i+1])
	}
	line := b.String()
	event := slices.ContainsFunc(dcGroupEventMsgs, func(m string) bool { return strings.Contains(msg, m) })
	l.events.addDebug(l.name + ": " + line)
	if event {
		l.events.add(l.name + ": " + line)
	}
	if event || level <= kgo.LogLevelWarn {
		fmt.Fprint(l.w, line)
	}
}

// dockerCompose is one compose project of docker-compose.yml: its own
// project name, host ports and containers.
type dockerCompose struct {
	docker  string   // docker CLI
	compose []string // docker-compose, or docker compose
	root    string   // module root: Dockerfile, docker-compose.yml
	project string
	env     []string
	nodes   []*dcNode
	http    *http.Client
	started bool   // up was called: there may be containers and logs
	imageID string // the image built and run

	pinnedMu sync.Mutex
	pinned   map[int32]*kgo.Client // per node, for coordinatorViews
}

// dcNode is one service of the project.
type dcNode struct {
	id        int32
	service   string // kcoord1..3
	kafkaPort int    // published on 127.0.0.1
	httpPort  int
	container string // id, once up
}

func (n *dcNode) kafkaAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.kafkaPort)) }
func (n *dcNode) httpAddr() string  { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.httpPort)) }

// newDockerCompose finds docker and compose (skipping the test when either is
// missing or no engine answers), the module root, and free host ports. It
// registers the project's removal; nothing is started yet.
func newDockerCompose(t *testing.T) *dockerCompose {
	t.Helper()
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker CLI not found: the docker-compose cluster test needs a Docker engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	var compose []string
	if c, err := exec.LookPath("docker-compose"); err == nil {
		compose = []string{c}
	} else if err := exec.CommandContext(ctx, docker, "compose", "version").Run(); err == nil {
		compose = []string{docker, "compose"}
	} else {
		t.Skip("neither docker-compose nor the docker compose plugin is installed")
	}

	dc := &dockerCompose{
		docker:  docker,
		compose: compose,
		root:    dcModuleRoot(t),
		project: fmt.Sprintf("kcoorde2e%d%04d", os.Getpid()%100000, rand.IntN(10000)),
		http:    &http.Client{Timeout: 2 * time.Second},
	}
	for i := range dockerNodes {
		n := &dcNode{id: int32(i + 1), service: fmt.Sprintf("kcoord%d", i+1)}
		n.kafkaPort = dcFreePort(t)
		n.httpPort = dcFreePort(t)
		dc.nodes = append(dc.nodes, n)
	}
	// The compose file's variables; the developer's KCOORD_ settings are
	// left out (cleanEnv), later entries win over earlier ones.
	dc.env = append(cleanEnv(),
		"KCOORD_IMAGE="+dockerImage,
		"KCOORD_CLUSTER_CONFIG=group.initial.rebalance.delay.ms=0",
		"KCOORD_CLUSTER_LOG_LEVEL=info",
		"COMPOSE_PROJECT_NAME="+dc.project,
	)
	for _, n := range dc.nodes {
		dc.env = append(dc.env,
			fmt.Sprintf("KCOORD%d_KAFKA_PORT=%d", n.id, n.kafkaPort),
			fmt.Sprintf("KCOORD%d_HTTP_PORT=%d", n.id, n.httpPort),
		)
	}
	t.Cleanup(func() { dc.down(t) })
	return dc
}

// dcModuleRoot is the directory of go.mod.
func dcModuleRoot(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, dcGoTool(), "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %q, %v", gomod, err)
	}
	root := filepath.Dir(gomod)
	for _, f := range []string{"Dockerfile", "docker-compose.yml"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("module root %s: %v", root, err)
		}
	}
	return root
}

func dcGoTool() string {
	if g, err := exec.LookPath("go"); err == nil {
		return g
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// dcFreePort is a TCP port on 127.0.0.1 that was free a moment ago (see
// freeAddr).
func dcFreePort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t, false))
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a command with the project's environment in the module root and
// returns its combined output.
func (dc *dockerCompose) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dc.root, dc.env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(out, 40))
	}
	return string(out), nil
}

// composeCmd runs compose on the project's file and name.
func (dc *dockerCompose) composeCmd(ctx context.Context, args ...string) (string, error) {
	full := append(slices.Clone(dc.compose[1:]), "-f", filepath.Join(dc.root, "docker-compose.yml"), "-p", dc.project)
	return dc.run(ctx, dc.compose[0], append(full, args...)...)
}

// buildImage builds a static kcoord (as `make build` does) into a temporary
// build context with the Dockerfile, and tags the image kcoord:dev (as `make
// image` does). The build context is that one file either way. The image the
// tag pointed at before is removed when nothing uses it, so repeated runs
// leave no dangling images.
func (dc *dockerCompose) buildImage(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerBuildBudget)
	defer cancel()
	start := time.Now()
	buildDir := dc.buildContext(t)
	gobuild := exec.CommandContext(ctx, dcGoTool(), "build", "-trimpath", "-ldflags", "-s -w -X github.com/kcoord/kcoord/release.commit=e2e",
		"-o", filepath.Join(buildDir, "bin", "kcoord"), "./cmd/kcoord")
	gobuild.Dir = dc.root
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("static build of ./cmd/kcoord: %v\n%s", err, out)
	}
	newID := dc.dockerBuild(ctx, t, buildDir, dockerImage)
	// The project runs this very image, even if a concurrent build moves the
	// tag meanwhile.
	dc.env = append(dc.env, "KCOORD_IMAGE="+newID)
	dc.imageID = newID
	t.Logf("built %s (%s) in %v", dockerImage, strings.TrimPrefix(newID, "sha256:")[:12], time.Since(start).Round(time.Millisecond))
}

// buildContext is a new build directory holding the Dockerfile and an
// empty bin/, for bin/kcoord.
func (dc *dockerCompose) buildContext(t *testing.T) string {
	t.Helper()
	buildDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(buildDir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(dc.root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buildDir, "Dockerfile"), dockerfile, 0o644); err != nil {
		t.Fatal(err)
	}
	return buildDir
}

// dockerBuild builds buildDir's image as tag and returns its id. The image
// the tag pointed at before is removed when nothing uses it, so repeated
// runs leave no dangling images.
func (dc *dockerCompose) dockerBuild(ctx context.Context, t *testing.T, buildDir, tag string) string {
	t.Helper()
	oldID, err := dc.run(ctx, dc.docker, "image", "inspect", "--format", "{{.Id}}", tag)
	if err != nil {
		oldID = "" // no such image yet
	}
	oldID = strings.TrimSpace(oldID)
	if _, err := dc.run(ctx, dc.docker, "build", "-q", "-t", tag, buildDir); err != nil {
		t.Fatalf("docker build: %v", err)
	}
	newID, err := dc.run(ctx, dc.docker, "image", "inspect", "--format", "{{.Id}}", tag)
	if err != nil {
		t.Fatal(err)
	}
	if newID = strings.TrimSpace(newID); oldID != "" && oldID != newID {
		_, _ = dc.run(ctx, dc.docker, "image", "rm", oldID) // fails, harmlessly, while containers use it
	}
	return newID
}

// up starts the project's three services (the image must exist: nothing is
// built or pulled) and records their container ids.
func (dc *dockerCompose) up(ctx context.Context, t *testing.T) {
	t.Helper()
	t.Logf("compose project %s: Kafka on %v", dc.project, dc.kafkaAddrs(dc.nodes...))
	dc.started = true
	if _, err := dc.composeCmd(ctx, "up", "-d", "--no-build"); err != nil {
		t.Fatalf("compose up: %v", err)
	}
	for _, n := range dc.nodes {
		out, err := dc.composeCmd(ctx, "ps", "-q", n.service)
		if err != nil {
			t.Fatalf("compose ps: %v", err)
		}
		n.container = strings.TrimSpace(out)
		if n.container == "" || strings.ContainsAny(n.container, " \n") {
			t.Fatalf("compose ps -q %s: %q, want one container id", n.service, out)
		}
	}
}

// down removes the project: containers, network and volumes. On failure it
// first logs the tail of every container's log. Containers, networks and
// volumes still labelled with the project afterwards are removed directly.
func (dc *dockerCompose) down(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerCleanupBudget)
	defer cancel()
	if t.Failed() && dc.started {
		if out, err := dc.composeCmd(ctx, "ps"); err == nil {
			t.Logf("compose ps:\n%s", out)
		}
		// The whole logs go to a file that outlives the test; the test log
		// gets each node's tail.
		if out, err := dc.composeCmd(ctx, "logs", "--no-color", "--timestamps"); err == nil {
			path := filepath.Join(os.TempDir(), "kcoord-e2e-"+dc.project+".log")
			if err := os.WriteFile(path, []byte(out), 0o644); err == nil {
				t.Logf("compose logs of %s: %s", dc.project, path)
			}
		}
		for _, n := range dc.nodes {
			if n.container == "" {
				continue
			}
			if out, err := dc.run(ctx, dc.docker, "logs", "--tail", "60", n.container); err == nil {
				t.Logf("%s log tail:\n%s", n.service, out)
			}
		}
	}
	if _, err := dc.composeCmd(ctx, "down", "-v", "--remove-orphans", "-t", "10"); err != nil {
		t.Logf("compose down: %v", err)
	}
	label := "label=com.docker.compose.project=" + dc.project
	for _, kind := range []struct{ ls, rm []string }{
		{[]string{"ps", "-aq", "--filter", label}, []string{"rm", "-f", "-v"}},
		{[]string{"network", "ls", "-q", "--filter", label}, []string{"network", "rm"}},
		{[]string{"volume", "ls", "-q", "--filter", label}, []string{"volume", "rm", "-f"}},
	} {
		out, err := dc.run(ctx, dc.docker, kind.ls...)
		if err != nil {
			t.Logf("cleanup: %v", err)
			continue
		}
		if ids := strings.Fields(out); len(ids) > 0 {
			if _, err := dc.run(ctx, dc.docker, append(kind.rm, ids...)...); err != nil {
				t.Errorf("cleanup of compose project %s: %v", dc.project, err)
			}
		}
	}
	// A concurrent build may have moved kcoord:dev meanwhile: then the image
	// this test built is untagged and goes (unless something still uses it).
	if dc.imageID != "" {
		if cur, err := dc.run(ctx, dc.docker, "image", "inspect", "--format", "{{.Id}}", dockerImage); err != nil || strings.TrimSpace(cur) != dc.imageID {
			_, _ = dc.run(ctx, dc.docker, "image", "rm", dc.imageID)
		}
	}
}

func (dc *dockerCompose) kafkaAddrs(nodes ...*dcNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.kafkaAddr())
	}
	return out
}

func (dc *dockerCompose) nodeByID(t *testing.T, id int32) *dcNode {
	t.Helper()
	for _, n := range dc.nodes {
		if n.id == id {
			return n
		}
	}
	t.Fatalf("node id %d is not one of the compose services", id)
	return nil
}

// kill sends SIGKILL to a node's container and waits until it has exited.
func (dc *dockerCompose) kill(ctx context.Context, t *testing.T, n *dcNode) {
	t.Helper()
	if _, err := dc.run(ctx, dc.docker, "kill", "--signal", "KILL", n.container); err != nil {
		t.Fatalf("docker kill %s: %v", n.service, err)
	}
	dcPoll(ctx, t, n.service+" to exit", 20*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		st, err := dc.state(ctx, n)
		if err != nil {
			return err
		}
		if st.status != "exited" {
			return fmt.Errorf("status %s", st.status)
		}
		return nil
	})
}

// start starts a stopped node's container again (same volume, ports and
// name).
func (dc *dockerCompose) start(ctx context.Context, t *testing.T, n *dcNode) {
	t.Helper()
	if _, err := dc.run(ctx, dc.docker, "start", n.container); err != nil {
		t.Fatalf("docker start %s: %v", n.service, err)
	}
}

type dcState struct{ status, exitCode, health string }

func (dc *dockerCompose) state(ctx context.Context, n *dcNode) (dcState, error) {
	out, err := dc.run(ctx, dc.docker, "inspect", "--format",
		"{{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", n.container)
	if err != nil {
		return dcState{}, err
	}
	f := strings.Fields(out)
	if len(f) != 3 {
		return dcState{}, fmt.Errorf("docker inspect %s: %q", n.service, out)
	}
	return dcState{f[0], f[1], f[2]}, nil
}

// waitHealthy waits until Docker reports the nodes' health checks (kcoord
// healthcheck, i.e. /readyz inside the container) healthy and /readyz
// answers 200 on their published HTTP ports. A container that exits fails
// at once, with its log.
func (dc *dockerCompose) waitHealthy(ctx context.Context, t *testing.T, within time.Duration, nodes ...*dcNode) {
	t.Helper()
	var names []string
	for _, n := range nodes {
		names = append(names, n.service)
	}
	var exited *dcNode
	var exitErr error
	dcPoll(ctx, t, strings.Join(names, ", ")+" healthy", within, 500*time.Millisecond, func(ctx context.Context) error {
		for _, n := range nodes {
			st, err := dc.state(ctx, n)
			if err != nil {
				return err
			}
			switch {
			case st.status == "exited" || st.status == "dead":
				exited, exitErr = n, fmt.Errorf("%s %s with code %s", n.service, st.status, st.exitCode)
				return nil // stop polling; reported below
			case st.status != "running" || st.health != "healthy":
				return fmt.Errorf("%s: %s, health %s", n.service, st.status, st.health)
			}
			if err := dc.readyz(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if exited != nil {
		logs, _ := dc.run(ctx, dc.docker, "logs", "--tail", "60", exited.container)
		t.Fatalf("%v before it was healthy; its log:\n%s", exitErr, logs)
	}
}

func (dc *dockerCompose) readyz(ctx context.Context, n *dcNode) error {
	body, code, err := dc.get(ctx, n, "/readyz")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s /readyz on %s: %d %s", n.service, n.httpAddr(), code, strings.TrimSpace(body))
	}
	return nil
}

func (dc *dockerCompose) get(ctx context.Context, n *dcNode, path string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.httpAddr()+path, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := dc.http.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: %w", n.service, path, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return "", 0, fmt.Errorf("%s %s: %w", n.service, path, err)
	}
	return b.String(), resp.StatusCode, nil
}

// withAdmin runs fn with a new kadm client seeded with nodes, closed after.
//
// After a node dies, reads go through a new client each time: franz-go
// (v1.22) keeps a group's coordinator cached when a sharded request
// (OffsetFetch, DescribeGroups: kadm.FetchOffsets, kadm.DescribeGroups)
// cannot even dial it, and sends every later request to the dead node
// without asking FindCoordinator again. Group members are not affected:
// their heartbeats and commits drop the cached coordinator on dial errors.
func (dc *dockerCompose) withAdmin(ctx context.Context, nodes []*dcNode, fn func(*kadm.Client) error) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(dc.kafkaAddrs(nodes...)...),
		kgo.RetryTimeout(5*time.Second),
		kgo.WithLogger(kgo.BasicLogger(io.Discard, kgo.LogLevelNone, nil)),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(kadm.NewClient(cl))
}

// waitOffsets waits until the group's committed offsets, read through
// nodes, are exactly want.
func (dc *dockerCompose) waitOffsets(ctx context.Context, t *testing.T, what string, within time.Duration, nodes []*dcNode, group string, want map[string]map[int32]committed) {
	t.Helper()
	dcPoll(ctx, t, what, within, 200*time.Millisecond, func(ctx context.Context) error {
		return dc.withAdmin(ctx, nodes, func(adm *kadm.Client) error {
			got, err := fetchOffsets(ctx, adm, group)
			if err != nil {
				return fmt.Errorf("fetch offsets: %w (FindCoordinator answers: %s)", err, dc.coordinatorViews(ctx, t, group, nodes))
			}
			return diffOffsets(got, want)
		})
	})
}

// coordinatorViews asks each node directly (not through a client's
// coordinator cache) which node coordinates group: "kcoord2→3 kcoord3→3".
func (dc *dockerCompose) coordinatorViews(ctx context.Context, t *testing.T, group string, nodes []*dcNode) string {
	dc.pinnedMu.Lock()
	defer dc.pinnedMu.Unlock()
	if dc.pinned == nil {
		dc.pinned = make(map[int32]*kgo.Client)
	}
	var parts []string
	for _, n := range nodes {
		cl := dc.pinned[n.id]
		if cl == nil {
			cl = newClient(t, n.kafkaAddr(), kgo.RetryTimeout(time.Second), kgo.WithLogger(kgo.BasicLogger(io.Discard, kgo.LogLevelNone, nil)))
			dc.pinned[n.id] = cl
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cl.SeedBrokers()[0].Request(rctx, req)
		cancel()
		switch r, _ := resp.(*kmsg.FindCoordinatorResponse); {
		case err != nil:
			parts = append(parts, fmt.Sprintf("%s→error %v", n.service, err))
		case len(r.Coordinators) == 1 && r.Coordinators[0].ErrorCode != 0:
			parts = append(parts, fmt.Sprintf("%s→%v", n.service, kerr.ErrorForCode(r.Coordinators[0].ErrorCode)))
		case len(r.Coordinators) == 1:
			parts = append(parts, fmt.Sprintf("%s→%d", n.service, r.Coordinators[0].NodeID))
		default:
			parts = append(parts, fmt.Sprintf("%s→%d (error code %d)", n.service, r.NodeID, r.ErrorCode))
		}
	}
	return strings.Join(parts, " ")
}

// shardsLed reads a node's kcoord_shards_led and kcoord_shards gauges.
func (dc *dockerCompose) shardsLed(ctx context.Context, n *dcNode) (led, shards int, err error) {
	body, code, err := dc.get(ctx, n, "/metrics")
	if err != nil {
		return 0, 0, err
	}
	if code != http.StatusOK {
		return 0, 0, fmt.Errorf("%s /metrics: HTTP %d", n.service, code)
	}
	ledV, okLed := dcMetric(body, "kcoord_shards_led")
	shardsV, okShards := dcMetric(body, "kcoord_shards")
	if !okLed || !okShards {
		return 0, 0, fmt.Errorf("%s /metrics lacks kcoord_shards_led or kcoord_shards", n.service)
	}
	return int(ledV), int(shardsV), nil
}

// dcMetric sums the samples of one metric (any labels) in Prometheus text
// format.
func dcMetric(body, name string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	return sum, found
}

// logShardsLed logs every reachable node's kcoord_shards_led.
func (dc *dockerCompose) logShardsLed(ctx context.Context, t *testing.T, when string) {
	t.Helper()
	var parts []string
	for _, n := range dc.nodes {
		led, _, err := dc.shardsLed(ctx, n)
		if err != nil {
			parts = append(parts, n.service+"=?")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", n.service, led))
	}
	t.Logf("kcoord_shards_led %s: %s", when, strings.Join(parts, " "))
}

// waitBalanced waits until the nodes together lead every shard and no node
// leads more than one shard more than another (5/5/6 for the compose
// cluster's 16 shards, the default).
func (dc *dockerCompose) waitBalanced(ctx context.Context, t *testing.T, within time.Duration) {
	t.Helper()
	dcPoll(ctx, t, "shard leadership balanced (kcoord_shards_led)", within, time.Second, func(ctx context.Context) error {
		var leds []int
		total, shards := 0, 0
		for _, n := range dc.nodes {
			led, s, err := dc.shardsLed(ctx, n)
			if err != nil {
				return err
			}
			leds, total, shards = append(leds, led), total+led, s
		}
		if total != shards || slices.Max(leds)-slices.Min(leds) > 1 {
			return fmt.Errorf("kcoord_shards_led %v (sum %d of %d shards)", leds, total, shards)
		}
		t.Logf("kcoord_shards_led balanced: %v of %d shards", leds, shards)
		return nil
	})
}

// dcPoll polls cond every interval until it returns nil, failing the test
// with cond's last error after within or when ctx ends.
func dcPoll(ctx context.Context, t *testing.T, what string, within, interval time.Duration, cond func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	lastReport := start
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := cond(cctx)
		ccancel()
		if err == nil {
			t.Logf("%s: after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			t.Logf("%s UTC still waiting for %s after %v: %v", lastReport.UTC().Format("15:04:05.000"), what, time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s: %v", time.Since(start).Round(time.Millisecond), what, err)
		case <-time.After(interval):
		}
	}
}
