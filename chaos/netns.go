package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoNetns is returned when this machine cannot give the suite network
// namespaces: it needs root and iproute2's ip, and iptables for
// partitions.
var ErrNoNetns = errors.New("chaos: network namespaces need root, ip and iptables")

// network is the suite's private network: one namespace per node, each
// with a veth to a router namespace, and a veth from the router to this
// process's namespace. Partitions and packet loss are iptables rules in
// the router's FORWARD chain, so they never touch this machine's own
// firewall and vanish with the namespaces. Names carry this process's pid,
// so a later run can tell a leftover of a dead run (and remove it) from a
// run in progress.
type network struct {
	id     string // pid
	subnet int    // the second octet: 10.subnet.0.0/16
	nodes  int
}

var nsName = regexp.MustCompile(`^kch(\d+)[rn]\d*$`)

// NetnsSupported says whether this machine can build the suite's
// network: it needs root, ip and iptables. nil when it can.
func NetnsSupported() error {
	if os.Geteuid() != 0 {
		return ErrNoNetns
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %v", ErrNoNetns, err)
		}
	}
	return nil
}

// newNetwork builds the namespaces and links for n nodes.
func newNetwork(ctx context.Context, n int) (*network, error) {
	if err := NetnsSupported(); err != nil {
		return nil, err
	}
	// Runs at once (make test as root beside make chaos) pick subnets one
	// at a time: a subnet is taken once its route exists.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "kcoord-chaos-net.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	removeStaleNamespaces(ctx)
	net := &network{id: strconv.Itoa(os.Getpid()), nodes: n}
	if err := net.pickSubnet(ctx); err != nil {
		return nil, err
	}
	if err := net.build(ctx); err != nil {
		net.close()
		return nil, err
	}
	return net, nil
}

func (n *network) router() string          { return "kch" + n.id + "r" }
func (n *network) node(i int) string       { return fmt.Sprintf("kch%sn%d", n.id, i) }
func (n *network) hostLink() string        { return "kc" + n.id + "h" }
func (n *network) nodeLink(i int) string   { return fmt.Sprintf("kc%sn%d", n.id, i) }
func (n *network) routerLink(i int) string { return fmt.Sprintf("kc%sr%d", n.id, i) }

// IP is node i's address (nodes count from 1).
func (n *network) IP(i int) string { return fmt.Sprintf("10.%d.%d.1", n.subnet, i) }

// pickSubnet takes the first 10.x.0.0/16 (x from 213) no route uses.
func (n *network) pickSubnet(ctx context.Context) error {
	out, err := run(ctx, "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	for x := 213; x < 250; x++ {
		if !strings.Contains(out, fmt.Sprintf("10.%d.", x)) {
			n.subnet = x
			return nil
		}
	}
	return errors.New("chaos: no free 10.x.0.0/16 for the suite's network")
}

func (n *network) build(ctx context.Context) error {
	r := n.router()
	steps := [][]string{
		{"ip", "netns", "add", r},
		{"ip", "-n", r, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "link", "add", n.hostLink(), "type", "veth", "peer", "name", "kc" + n.id + "g", "netns", r},
		{"ip", "addr", "add", fmt.Sprintf("10.%d.0.1/24", n.subnet), "dev", n.hostLink()},
		{"ip", "link", "set", n.hostLink(), "up"},
		{"ip", "-n", r, "addr", "add", fmt.Sprintf("10.%d.0.254/24", n.subnet), "dev", "kc" + n.id + "g"},
		{"ip", "-n", r, "link", "set", "kc" + n.id + "g", "up"},
		{"ip", "route", "add", fmt.Sprintf("10.%d.0.0/16", n.subnet), "via", fmt.Sprintf("10.%d.0.254", n.subnet)},
	}
	for i := 1; i <= n.nodes; i++ {
		ns := n.node(i)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", r, "link", "add", n.routerLink(i), "type", "veth", "peer", "name", n.nodeLink(i), "netns", ns},
			[]string{"ip", "-n", r, "addr", "add", fmt.Sprintf("10.%d.%d.254/24", n.subnet, i), "dev", n.routerLink(i)},
			[]string{"ip", "-n", r, "link", "set", n.routerLink(i), "up"},
			[]string{"ip", "-n", ns, "addr", "add", n.IP(i) + "/24", "dev", n.nodeLink(i)},
			[]string{"ip", "-n", ns, "link", "set", n.nodeLink(i), "up"},
			[]string{"ip", "-n", ns, "route", "add", "default", "via", fmt.Sprintf("10.%d.%d.254", n.subnet, i)},
		)
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// exec returns the command line that runs argv inside node i's namespace.
func (n *network) exec(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", n.node(i)}, argv...)
}

// iptables runs iptables in the router namespace.
func (n *network) iptables(ctx context.Context, args ...string) error {
	_, err := run(ctx, "ip", append([]string{"netns", "exec", n.router(), "iptables", "-w"}, args...)...)
	return err
}

// cut drops every packet from node a to node b (one way).
func (n *network) cut(ctx context.Context, a, b int) error {
	return n.iptables(ctx, "-A", "FORWARD", "-s", n.IP(a), "-d", n.IP(b), "-j", "DROP")
}

// lose drops the given share of the packets to or from the Raft port
// (only nodes use it).
func (n *network) lose(ctx context.Context, port int, share float64) error {
	for _, dir := range []string{"--dport", "--sport"} {
		if err := n.iptables(ctx, "-A", "FORWARD",
			"-p", "tcp", dir, strconv.Itoa(port), "-m", "statistic", "--mode", "random",
			"--probability", strconv.FormatFloat(share, 'f', 3, 64), "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every rule: the router's FORWARD chain holds only the
// suite's.
func (n *network) heal(ctx context.Context) error { return n.iptables(ctx, "-F", "FORWARD") }

// close deletes every namespace; the links and rules inside go with them,
// and the host's end of the router link and its route with its peer.
func (n *network) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 1; i <= n.nodes; i++ {
		_, _ = run(ctx, "ip", "netns", "del", n.node(i))
	}
	_, _ = run(ctx, "ip", "netns", "del", n.router())
	_, _ = run(ctx, "ip", "link", "del", n.hostLink())
}

// removeStaleNamespaces deletes the namespaces of runs whose process is
// gone (a run killed before it could clean up).
func removeStaleNamespaces(ctx context.Context) {
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m := nsName.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); err == nil {
			continue
		}
		_, _ = run(ctx, "ip", "netns", "del", f[0])
		_, _ = run(ctx, "ip", "link", "del", "kc"+m[1]+"h")
	}
}

// lockFile takes an exclusive flock on path, waiting for it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
