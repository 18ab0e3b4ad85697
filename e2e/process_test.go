package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcoord/kcoord/bench"

	"github.com/kcoord/kcoord/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinary()
	os.Exit(code)
}

// kcoordBinary returns the path of a freshly built ./cmd/kcoord.
func kcoordBinary(t testing.TB) string { return testkit.KcoordBinary(t) }

// kcoordProc is a `kcoord serve` subprocess with fixed loopback ports and a
// data directory, so it can be killed and started again on the same state.
type kcoordProc struct {
	t       testing.TB
	bin     string
	dataDir string
	logPath string
	kafka   string
	raft    string
	gossip  string
	http    string
	extra   []string

	cmd    *exec.Cmd
	exited chan struct{}
}

// newProc prepares (does not start) a single-node kcoord with free loopback
// ports, 8 shards, a 100ms initial rebalance delay and extra serve args. It
// is killed when the test ends; its log is shown if the test failed.
func newProc(t testing.TB, extra ...string) *kcoordProc {
	t.Helper()
	dir := t.TempDir()
	p := &kcoordProc{
		t:       t,
		bin:     kcoordBinary(t),
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "kcoord.log"),
		kafka:   freeAddr(t, false),
		raft:    freeAddr(t, false),
		gossip:  freeAddr(t, true),
		http:    freeAddr(t, false),
		extra:   extra,
	}
	t.Cleanup(func() {
		if p.running() {
			p.kill9()
		}
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				t.Logf("kcoord log (%s):\n%s", p.logPath, tail(b, 200))
			}
		}
	})
	return p
}

// start runs the binary and waits until /readyz answers 200.
func (p *kcoordProc) start(ctx context.Context) {
	p.t.Helper()
	p.launch()
	p.waitReady(ctx)
}

// launch runs the binary without waiting for it to be ready (nodes of a
// cluster become ready only once enough of them run).
func (p *kcoordProc) launch() {
	p.t.Helper()
	if p.running() {
		p.t.Fatal("kcoord already running")
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(logf, "----- start %s\n", time.Now().Format(time.RFC3339Nano))
	args := append([]string{"serve",
		"--node-id", "1",
		"--data-dir", p.dataDir,
		"--kafka-addr", p.kafka,
		"--raft-addr", p.raft,
		"--gossip-addr", p.gossip,
		"--http-addr", p.http,
		"-c", "offsets.topic.num.partitions=8",
		"-c", "group.initial.rebalance.delay.ms=100",
	}, p.extra...)
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = cleanEnv()
	// The child dies with the test binary, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.t.Fatalf("start kcoord: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
}

// waitReady waits until /readyz answers 200, failing the test if the
// process exits or ctx ends first.
func (p *kcoordProc) waitReady(ctx context.Context) {
	p.t.Helper()
	cmd, exited := p.cmd, p.exited
	t0 := time.Now()
	readyURL := "http://" + p.http + "/readyz"
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			p.t.Fatalf("kcoord exited before ready: %v", cmd.ProcessState)
		case <-ctx.Done():
			p.t.Fatalf("kcoord not ready: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := client.Get(readyURL)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			p.t.Logf("kcoord pid %d ready after %v", cmd.Process.Pid, time.Since(t0).Round(time.Millisecond))
			return
		}
	}
}

func (p *kcoordProc) running() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends sig (SIGTERM: a planned stop) and waits for the process to
// exit.
func (p *kcoordProc) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("kill -%d: %v", sig, err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("kcoord pid %d still running 30s after %s", p.cmd.Process.Pid, sig)
	}
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (p *kcoordProc) kill9() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("kill -9: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("kcoord pid %d still running 10s after SIGKILL", p.cmd.Process.Pid)
	}
}

// freeAddr returns a loopback host:port that was free a moment ago (TCP,
// and UDP too when udp is set, for memberlist), from below the kernel's
// ephemeral range and handed out once per test binary: bench's picker,
// which the benchmark's processes use too.
func freeAddr(t testing.TB, udp bool) string {
	t.Helper()
	addr, err := bench.FreeLoopbackAddr(udp)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// cleanEnv is the environment without KCOORD_ variables, so a developer's
// settings cannot change the flags a test passes.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KCOORD_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(b []byte, lines int) string {
	ls := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return string(bytes.Join(ls, []byte("\n")))
}
