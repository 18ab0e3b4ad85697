package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/server"
)

const serveLong = `Run one kcoord node: the Kafka protocol listener, the node's Raft shards,
gossip, and the HTTP endpoints /healthz, /readyz, /metrics and a status page.

With no flags at all it is a ready single node: Kafka on 127.0.0.1:9092, data
in ./kcoord-data.

A new cluster of N nodes bootstraps once N nodes started with
--bootstrap-expect N see each other. A node started with --join and no
--bootstrap-expect joins an existing cluster and never bootstraps. A data dir
belongs to one cluster for life: nodes refuse peers of another cluster, and a
node whose data dir is empty but whose id is a voter of the cluster refuses to
start.

Every flag can also be set from an environment variable named after it
(--data-dir → KCOORD_DATA_DIR; -c/--config → KCOORD_CONFIG, a comma-separated
key=value list), and from the YAML --config-file, whose keys are Kafka config
names and, optionally, serve flag names (node-id: 2, join: [a:7946, b:7946]).
Precedence, per setting: flag > environment > config file > default. Empty
environment variables count as unset.

Kafka config names (-c key=value):
`

// node is what serve needs of a server.Server; tests substitute a fake.
type node interface {
	Start() error
	Ready() bool
	KafkaAddr() net.Addr
	Shutdown(ctx context.Context) error
}

var newNode = func(cfg server.Config, logger hclog.Logger, reg *prometheus.Registry) (node, error) {
	s, err := server.New(cfg, logger, reg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newServeCmd() *cobra.Command {
	var o *serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a kcoord node",
		Long:  serveLong + kafkaConfigHelp(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.resolve(cmd.Flags(), os.LookupEnv)
			if err != nil {
				return err
			}
			logger, err := newLogger(o.logLevel, o.logJSON, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, logger, o.shutdownTimeout)
		},
	}
	o = addServeFlags(cmd.Flags())
	return cmd
}

func kafkaConfigHelp() string {
	var b strings.Builder
	d := server.DefaultConfig()
	for _, k := range server.KafkaConfigKeys() {
		v, _ := d.KafkaConfig(k)
		if v == "" {
			v = "(unset)"
		}
		fmt.Fprintf(&b, "  %-37s %-11s %s\n", k, v, server.KafkaConfigHelp(k))
	}
	return b.String()
}

func newLogger(level string, json bool, w io.Writer) (hclog.Logger, error) {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		return nil, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", level)
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "kcoord",
		Level:      lvl,
		JSONFormat: json,
		Output:     w,
	}), nil
}

// serve runs a node until ctx ends or SIGINT/SIGTERM arrives, then stops the
// HTTP server and the node within shutdownTimeout. A second signal during
// shutdown kills the process.
func serve(ctx context.Context, cfg server.Config, logger hclog.Logger, shutdownTimeout time.Duration) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if err := server.ExportRaftMetrics(reg); err != nil {
		// Only a second serve in one process (tests) meets this; the
		// node serves without raft's own timings on /metrics.
		logger.Warn("raft's metrics are not on /metrics", "error", err)
	}

	// Bind HTTP first so a taken port fails before the node starts.
	var httpLn net.Listener
	if cfg.HTTPAddr != "" {
		var err error
		if httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return fmt.Errorf("http-addr: %w", err)
		}
		defer httpLn.Close()
	}

	n, err := newNode(cfg, logger, reg)
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("start: %w", err), n.Shutdown(sctx))
	}
	bootstrap := fmt.Sprint(cfg.BootstrapExpect)
	if cfg.BootstrapExpect == 0 {
		bootstrap = "none (joins an existing cluster)"
	}
	shards := any(cfg.OffsetsTopicNumPartitions)
	if sc, ok := n.(interface{ ShardCount() int32 }); ok {
		shards = sc.ShardCount() // the cluster's, when the setting is unset
	}
	logger.Info("serving", "node_id", cfg.NodeID, "kafka_addr", fmt.Sprint(n.KafkaAddr()), "http_addr", addrString(httpLn),
		"raft_addr", cfg.RaftAddr, "gossip_addr", cfg.GossipAddr, "shards", shards,
		"bootstrap_expect", bootstrap, "gomaxprocs", runtime.GOMAXPROCS(0))

	httpErr := make(chan error, 1)
	var httpSrv *http.Server
	if httpLn != nil {
		var mux *http.ServeMux
		if s, ok := n.(interface {
			HTTPHandler(prometheus.Gatherer) *http.ServeMux
		}); ok {
			mux = s.HTTPHandler(reg)
		} else {
			mux = http.NewServeMux()
			mux.Handle("/", server.NewHTTPHandler(n.Ready, reg))
		}
		if fi, ok := n.(interface{ FaultHandler() http.Handler }); ok && cfg.FaultInjection {
			logger.Warn("fault injection on: /debug/faults/raft delays and cuts this node's Raft traffic (--fault-injection, test only)")
			mux.Handle("/debug/faults/", fi.FaultHandler())
		}
		if cfg.Pprof {
			servePprof(mux)
			logger.Info("profiler on: /debug/pprof/ on the HTTP address (--pprof)")
		}
		var handler http.Handler = mux
		httpSrv = &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 5 * time.Second,
			ErrorLog:          logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		}
		go func() { httpErr <- httpSrv.Serve(httpLn) }()
	}
	go logWhenReady(ctx, n, logger)
	if r, ok := n.(interface{ ReloadTLS() error }); ok && cfg.TLSCertFile != "" {
		go reloadTLSOnSIGHUP(ctx, r, logger)
	}

	var fatal <-chan struct{}
	f, canFail := n.(interface {
		Fatal() <-chan struct{}
		FatalErr() error
	})
	if canFail {
		fatal = f.Fatal()
	}
	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-httpErr:
		runErr = fmt.Errorf("http server: %w", err)
		logger.Error("shutting down", "error", err)
	case <-fatal:
		runErr = f.FatalErr()
		logger.Error("shutting down", "error", runErr)
	}
	stop() // from here a second signal terminates the process

	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if httpSrv != nil {
		if err := httpSrv.Shutdown(sctx); err != nil {
			httpSrv.Close()
		}
	}
	if err := n.Shutdown(sctx); err != nil {
		return errors.Join(runErr, fmt.Errorf("shutdown: %w", err))
	}
	logger.Info("stopped")
	return runErr
}

func addrString(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}

// logWhenReady logs once when the node first becomes ready.
func logWhenReady(ctx context.Context, n node, logger hclog.Logger) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if n.Ready() {
			logger.Info("ready")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reloadTLSOnSIGHUP reloads the Kafka listener's certificate on every
// SIGHUP until ctx ends (the files are also looked at on handshakes).
func reloadTLSOnSIGHUP(ctx context.Context, n interface{ ReloadTLS() error }, logger hclog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := n.ReloadTLS(); err != nil {
				logger.Warn("SIGHUP: the TLS certificate was not reloaded", "error", err)
			}
		}
	}
}
