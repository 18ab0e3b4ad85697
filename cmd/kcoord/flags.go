package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/kcoord/kcoord/server"
)

const (
	envPrefix           = "KCOORD_"
	flagConfig          = "config"
	flagConfigFile      = "config-file"
	flagBootstrapExpect = "bootstrap-expect"
)

// serveOptions holds what `kcoord serve` reads from its flags. The node's
// settings are bound straight to cfg; Kafka config pairs stay strings until
// resolve applies them in order of precedence.
type serveOptions struct {
	cfg             server.Config
	kafka           []string // -c key=value
	configFile      string
	logLevel        string
	logJSON         bool
	shutdownTimeout time.Duration
	// superuserPasswordFile is --sasl-superuser-password-file; the
	// password may come from KCOORD_SASL_SUPERUSER_PASSWORD instead.
	superuserPasswordFile string
}

// envSuperuserPassword holds the bootstrap superuser's password when no
// --sasl-superuser-password-file is given. It is not a flag, so that the
// password never shows in a process listing.
const envSuperuserPassword = envPrefix + "SASL_SUPERUSER_PASSWORD"

// addServeFlags defines the flags of `kcoord serve` on fs, with
// server.DefaultConfig's values as defaults.
func addServeFlags(fs *pflag.FlagSet) *serveOptions {
	o := &serveOptions{cfg: server.DefaultConfig()}
	c := &o.cfg
	fs.Int32Var(&c.NodeID, "node-id", c.NodeID, "node id, also the Kafka broker id")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of Raft logs and snapshots")
	fs.StringVar(&c.KafkaAddr, "kafka-addr", c.KafkaAddr, "Kafka protocol listener host:port")
	fs.StringVar(&c.AdvertiseKafkaAddr, "advertise-kafka-addr", c.AdvertiseKafkaAddr, "Kafka host:port given to clients (default: the listener's)")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "PEM certificate of the Kafka listener, which then speaks TLS 1.2+ only (reloaded when it changes and on SIGHUP)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", c.TLSClientCAFile, "PEM CA certificates: Kafka clients must present a certificate they signed (mutual TLS)")
	fs.StringVar(&c.SASLSuperuser, "sasl-superuser", c.SASLSuperuser, "the bootstrap superuser: a SASL user this node lets in with the password from $"+envSuperuserPassword+" or --sasl-superuser-password-file, and that may do everything")
	fs.StringVar(&o.superuserPasswordFile, "sasl-superuser-password-file", "", "file holding the bootstrap superuser's password (one line)")
	fs.StringVar(&c.RaftAddr, "raft-addr", c.RaftAddr, "Raft host:port, shared by all shards")
	fs.StringVar(&c.AdvertiseRaftAddr, "advertise-raft-addr", c.AdvertiseRaftAddr, "Raft host:port other nodes dial (default: the listener's; required when it binds 0.0.0.0)")
	fs.StringVar(&c.RaftTLSCertFile, "raft-tls-cert-file", c.RaftTLSCertFile, "PEM certificate this node presents on the Raft port, which then speaks mutual TLS 1.2+ only, dialing and accepting (reloaded when it changes; needs --raft-tls-key-file and --raft-tls-ca-file)")
	fs.StringVar(&c.RaftTLSKeyFile, "raft-tls-key-file", c.RaftTLSKeyFile, "PEM private key of --raft-tls-cert-file")
	fs.StringVar(&c.RaftTLSCAFile, "raft-tls-ca-file", c.RaftTLSCAFile, "PEM CA certificates: Raft peers must present a certificate they signed, for server and client auth (names are not checked)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "memberlist gossip host:port")
	fs.StringVar(&c.AdvertiseGossipAddr, "advertise-gossip-addr", c.AdvertiseGossipAddr, "gossip host:port other nodes reach (default: the listener's, or a private IP when it binds 0.0.0.0)")
	fs.StringVar(&c.GossipKeyFile, "gossip-key-file", c.GossipKeyFile, "file of gossip encryption keys, one base64 key of 16, 24 or 32 bytes a line: the first encrypts, all decrypt (add a new key second, move it first, drop the old one to rotate; re-read when it changes)")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "host:port of /healthz, /readyz, /metrics and the status page (empty: off)")
	fs.BoolVar(&c.Pprof, "pprof", c.Pprof, "serve Go's profiler (net/http/pprof) under /debug/pprof/ on --http-addr")
	fs.StringSliceVar(&c.Join, "join", c.Join, "gossip seeds, host:port,... (repeatable)")
	fs.IntVar(&c.BootstrapExpect, flagBootstrapExpect, c.BootstrapExpect, "nodes that must see each other before the first bootstrap; unset with --join, the node joins an existing cluster and never bootstraps")
	// The default depends on --join (see resolve); say so in the help.
	fs.Lookup(flagBootstrapExpect).DefValue = "1 without --join, none with it"
	fs.StringArrayVarP(&o.kafka, flagConfig, "c", nil, "Kafka config key=value (repeatable; also comma-separated)")
	fs.StringVar(&o.configFile, flagConfigFile, "", "YAML file of Kafka config keys and serve flag names")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.BoolVar(&o.logJSON, "log-json", false, "log as JSON")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long a clean shutdown may take (leadership moves, kcoord.shutdown.drain.ms, then the stop)")
	// Test-only switches of the chaos suite, hidden from the help.
	fs.BoolVar(&c.FaultInjection, "fault-injection", false, "serve /debug/faults/raft on --http-addr (test only)")
	fs.BoolVar(&c.UnsafeAckBeforeCommit, "unsafe-ack-before-commit", false, "answer OffsetCommit before Raft commits it: a planted bug (test only)")
	fs.BoolVar(&c.UnsafeSkipFsync, "unsafe-skip-fsync", false, "acknowledge log writes without fdatasync: a planted bug (test only)")
	_ = fs.MarkHidden("fault-injection")
	_ = fs.MarkHidden("unsafe-ack-before-commit")
	fs.BoolVar(&c.UnsafeIgnoreFeatureLevels, "unsafe-ignore-feature-levels", false, "write formats the cluster has not finalized: a planted bug (test only)")
	_ = fs.MarkHidden("unsafe-skip-fsync")
	_ = fs.MarkHidden("unsafe-ignore-feature-levels")
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [$" + envName(f.Name) + "]"
	})
	return o
}

// envName is the environment variable of a flag: --data-dir → KCOORD_DATA_DIR.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// resolve completes o.cfg from the environment and the config file for every
// flag not given on the command line (flag > env > file > default), applies
// the Kafka config pairs in the same order of precedence, and validates.
// An empty environment variable counts as unset.
//
// --bootstrap-expect defaults to 1 without --join and to none (0: join an
// existing cluster, never bootstrap) with it; a value given anywhere (flag,
// environment or config file) wins, and must be at least 1.
func (o *serveOptions) resolve(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (server.Config, error) {
	env := func(flag string) (string, bool) {
		v, ok := lookupEnv(envName(flag))
		return v, ok && v != ""
	}

	path := o.configFile
	if v, ok := env(flagConfigFile); ok && !fs.Changed(flagConfigFile) {
		path = v
	}
	var file configFile
	if path != "" {
		var err error
		if file, err = readConfigFile(path, fs); err != nil {
			return server.Config{}, err
		}
	}

	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == flagConfig || f.Name == flagConfigFile || f.Name == "help" {
			return
		}
		if v, ok := env(f.Name); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("$%s=%q: %w", envName(f.Name), v, err))
			}
		} else if v, ok := file.flags[f.Name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("config file %s: %s: %q: %w", path, f.Name, v, err))
			}
		}
	})
	if len(errs) > 0 {
		return server.Config{}, errs[0]
	}

	cfg := o.cfg
	var join []string // "a:1, b:2" and "" from env or file: trimmed, empties dropped
	for _, s := range cfg.Join {
		if s = strings.TrimSpace(s); s != "" {
			join = append(join, s)
		}
	}
	cfg.Join = join
	switch {
	case !fs.Changed(flagBootstrapExpect) && len(cfg.Join) > 0:
		cfg.BootstrapExpect = 0 // join only
	case cfg.BootstrapExpect < 1:
		return server.Config{}, fmt.Errorf("--%s %d: must be at least 1 (leave it unset with --join to join an existing cluster)",
			flagBootstrapExpect, cfg.BootstrapExpect)
	}
	for _, kv := range file.kafka {
		if err := cfg.SetKafkaConfig(kv[0], kv[1]); err != nil {
			return server.Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if v, ok := env(flagConfig); ok {
		if err := setKafkaPairs(&cfg, []string{v}); err != nil {
			return server.Config{}, fmt.Errorf("$%s: %w", envName(flagConfig), err)
		}
	}
	if err := setKafkaPairs(&cfg, o.kafka); err != nil {
		return server.Config{}, fmt.Errorf("--%s: %w", flagConfig, err)
	}
	password, err := superuserPassword(o.superuserPasswordFile, lookupEnv)
	if err != nil {
		return server.Config{}, err
	}
	cfg.SASLSuperuserPassword = password
	if err := cfg.Validate(); err != nil {
		return server.Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

// superuserPassword reads the bootstrap superuser's password from file
// (its first line) or, without one, from $KCOORD_SASL_SUPERUSER_PASSWORD;
// "" when neither is given.
func superuserPassword(file string, lookupEnv func(string) (string, bool)) (string, error) {
	env, inEnv := lookupEnv(envSuperuserPassword)
	switch {
	case file == "":
		return env, nil
	case inEnv && env != "":
		return "", fmt.Errorf("the superuser's password is given twice: by --sasl-superuser-password-file and by $%s", envSuperuserPassword)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--sasl-superuser-password-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSuffix(line, "\r"); line == "" {
		return "", fmt.Errorf("--sasl-superuser-password-file %s: the first line is empty", file)
	}
	return line, nil
}

// setKafkaPairs applies key=value pairs; each argument may hold several,
// separated by commas. A piece that does not start with a known key and
// "=" continues the value before it, so that list values and
// distinguished names read as Kafka writes them:
// "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,super.users=User:CN=a,O=b".
func setKafkaPairs(cfg *server.Config, args []string) error {
	known := server.KafkaConfigKeys()
	for _, arg := range args {
		var pairs [][2]string
		for _, piece := range strings.Split(arg, ",") {
			k, v, ok := strings.Cut(piece, "=")
			k = strings.TrimSpace(k)
			switch {
			case strings.TrimSpace(piece) == "":
			case ok && (slices.Contains(known, k) || len(pairs) == 0):
				pairs = append(pairs, [2]string{k, v})
			case len(pairs) > 0:
				pairs[len(pairs)-1][1] += "," + piece
			default:
				return fmt.Errorf("%q: want key=value", strings.TrimSpace(piece))
			}
		}
		for _, kv := range pairs {
			if err := cfg.SetKafkaConfig(kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// configFile is a parsed --config-file: serve flag values as strings, and
// Kafka config pairs in file order.
type configFile struct {
	flags map[string]string
	kafka [][2]string
}

// readConfigFile reads a YAML mapping whose keys are Kafka config names or
// serve flag names (not config or config-file). Values are scalars; a list is
// accepted for flags taking several values (join). A null value is ignored.
func readConfigFile(path string, fs *pflag.FlagSet) (configFile, error) {
	out := configFile{flags: map[string]string{}}
	data, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return out, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return out, nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return out, fmt.Errorf("config file %s: want a mapping of key: value", path)
	}
	kafkaKeys := server.KafkaConfigKeys()
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		fail := func(format string, args ...any) (configFile, error) {
			return out, fmt.Errorf("config file %s line %d: %s: %s", path, root.Content[i].Line, key, fmt.Sprintf(format, args...))
		}
		if seen[key] {
			return fail("given twice")
		}
		seen[key] = true
		var value string
		switch {
		case val.Tag == "!!null":
			continue
		case val.Kind == yaml.ScalarNode:
			value = val.Value
		case val.Kind == yaml.SequenceNode:
			items := make([]string, 0, len(val.Content))
			for _, it := range val.Content {
				if it.Kind != yaml.ScalarNode {
					return fail("want a list of scalars")
				}
				items = append(items, it.Value)
			}
			value = strings.Join(items, ",")
		default:
			return fail("want a scalar or a list")
		}
		switch f := fs.Lookup(key); {
		case slices.Contains(kafkaKeys, key):
			if val.Kind != yaml.ScalarNode {
				return fail("want a scalar")
			}
			out.kafka = append(out.kafka, [2]string{key, value})
		case f != nil && key != flagConfig && key != flagConfigFile && key != "help":
			if val.Kind == yaml.SequenceNode && f.Value.Type() != "stringSlice" {
				return fail("want a scalar")
			}
			out.flags[key] = value
		default:
			return fail("unknown key (want a Kafka config name or a serve flag name)")
		}
	}
	return out, nil
}
