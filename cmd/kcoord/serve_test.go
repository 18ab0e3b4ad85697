package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcoord/kcoord/server"
)

type fakeNode struct {
	startErr  error
	ready     atomic.Bool
	started   atomic.Bool
	shutdowns atomic.Int32
}

func (f *fakeNode) Start() error {
	f.started.Store(true)
	return f.startErr
}
func (f *fakeNode) Ready() bool         { return f.ready.Load() }
func (f *fakeNode) KafkaAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092} }
func (f *fakeNode) Shutdown(context.Context) error {
	f.shutdowns.Add(1)
	return nil
}

// useFake makes serve build f instead of a server.Server.
func useFake(t *testing.T, f *fakeNode) {
	old := newNode
	newNode = func(server.Config, hclog.Logger, *prometheus.Registry) (node, error) { return f, nil }
	t.Cleanup(func() { newNode = old })
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startServe runs serve with a fake node on a free HTTP port and returns
// that address, serve's result channel and the log.
func startServe(t *testing.T, ctx context.Context, f *fakeNode, mutate ...func(*server.Config)) (string, chan error, *bytes.Buffer) {
	t.Helper()
	useFake(t, f)
	cfg := server.DefaultConfig()
	cfg.HTTPAddr = freeAddr(t)
	for _, m := range mutate {
		m(&cfg)
	}
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, logger, 2*time.Second) }()
	waitFor(t, "/healthz", func() bool {
		resp, err := http.Get("http://" + cfg.HTTPAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return cfg.HTTPAddr, done, &logs
}

func TestServeLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeNode{}
	addr, done, _ := startServe(t, ctx, f)

	if _, err := healthcheck(ctx, addr, time.Second); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("healthcheck before ready: %v", err)
	}
	f.ready.Store(true)
	if msg, err := healthcheck(ctx, addr, time.Second); err != nil || msg != "ready" {
		t.Fatalf("healthcheck when ready: %q, %v", msg, err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"go_goroutines", "process_"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return")
	}
	if n := f.shutdowns.Load(); n != 1 {
		t.Errorf("Shutdown called %d times", n)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("HTTP still listening after serve returned")
	}
}

// Go's profiler is on the HTTP address only with --pprof.
func TestServePprofOnlyWhenAsked(t *testing.T) {
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, on := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		addr, done, logs := startServe(t, ctx, &fakeNode{}, func(c *server.Config) { c.Pprof = on })
		code, body := get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		switch {
		case on && (code != http.StatusOK || !strings.Contains(body, "goroutine profile")):
			t.Errorf("--pprof: /debug/pprof/goroutine answered %d: %.200s", code, body)
		case !on && code != http.StatusNotFound:
			t.Errorf("without --pprof: /debug/pprof/goroutine answered %d, want 404", code)
		}
		if on && !strings.Contains(logs.String(), "profiler on") {
			t.Errorf("--pprof without a log line saying so:\n%s", logs)
		}
		cancel()
		<-done
	}
}

func TestServeSIGTERM(t *testing.T) {
	f := &fakeNode{}
	_, done, logs := startServe(t, context.Background(), f)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return on SIGTERM")
	}
	if f.shutdowns.Load() != 1 {
		t.Error("node not shut down")
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("log: %s", logs)
	}
}

func TestServeStartFails(t *testing.T) {
	f := &fakeNode{startErr: errors.New("boom")}
	useFake(t, f)
	cfg := server.DefaultConfig()
	cfg.HTTPAddr = freeAddr(t)
	err := serve(context.Background(), cfg, hclog.NewNullLogger(), time.Second)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("serve: %v", err)
	}
	if f.shutdowns.Load() != 1 {
		t.Error("a node that failed to start was not shut down")
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		t.Fatalf("HTTP port not released: %v", err)
	}
	ln.Close()
}

func TestServeHTTPPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := &fakeNode{}
	useFake(t, f)
	cfg := server.DefaultConfig()
	cfg.HTTPAddr = ln.Addr().String()
	if err := serve(context.Background(), cfg, hclog.NewNullLogger(), time.Second); err == nil || !strings.Contains(err.Error(), "http-addr") {
		t.Fatalf("serve: %v", err)
	}
	if f.started.Load() {
		t.Error("node started although the HTTP port was taken")
	}
}

func TestHealthcheck(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(server.NewHTTPHandler(ready.Load, nil))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	if _, err := healthcheck(context.Background(), addr, time.Second); err == nil {
		t.Error("not ready: no error")
	} else if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "not ready") {
		t.Errorf("message %q", msg)
	}
	ready.Store(true)
	if _, err := healthcheck(context.Background(), addr, time.Second); err != nil {
		t.Errorf("ready: %v", err)
	}
	if _, err := healthcheck(context.Background(), srv.URL, time.Second); err != nil {
		t.Errorf("ready by URL: %v", err)
	}
	if _, err := healthcheck(context.Background(), freeAddr(t), time.Second); err == nil {
		t.Error("nothing listening: no error")
	}

	// Through the command, with the address from the environment.
	t.Setenv("KCOORD_HTTP_ADDR", addr)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"healthcheck"})
	if err := root.Execute(); err != nil || strings.TrimSpace(out.String()) != "ready" {
		t.Errorf("kcoord healthcheck: %q, %v", out.String(), err)
	}
	root = newRootCmd()
	root.SetArgs([]string{"healthcheck", "--http-addr", freeAddr(t)})
	if err := root.Execute(); err == nil {
		t.Error("kcoord healthcheck --http-addr <closed port>: no error")
	}
}

func TestReadyzURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9644":         "http://127.0.0.1:9644/readyz",
		"0.0.0.0:9644":           "http://127.0.0.1:9644/readyz",
		":9644":                  "http://127.0.0.1:9644/readyz",
		"[::]:9644":              "http://127.0.0.1:9644/readyz",
		"node1:9644":             "http://node1:9644/readyz",
		"http://node1:9644/":     "http://node1:9644/readyz",
		"https://node1.example/": "https://node1.example/readyz",
	} {
		if got := readyzURL(in); got != want {
			t.Errorf("readyzURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil || !strings.HasPrefix(out.String(), "kcoord ") {
		t.Errorf("kcoord version: %q, %v", out.String(), err)
	}
}
