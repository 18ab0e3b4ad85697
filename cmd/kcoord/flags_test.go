package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kcoord/kcoord/server"
)

// resolveArgs parses args as `kcoord serve` would and resolves them against
// env (instead of the process environment).
func resolveArgs(args []string, env map[string]string) (server.Config, *serveOptions, error) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o := addServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return server.Config{}, o, err
	}
	cfg, err := o.resolve(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return cfg, o, err
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kcoord.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"data-dir":              "KCOORD_DATA_DIR",
		"advertise-kafka-addr":  "KCOORD_ADVERTISE_KAFKA_ADDR",
		"advertise-raft-addr":   "KCOORD_ADVERTISE_RAFT_ADDR",
		"advertise-gossip-addr": "KCOORD_ADVERTISE_GOSSIP_ADDR",
		"config":                "KCOORD_CONFIG",
		"node-id":               "KCOORD_NODE_ID",
	} {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestResolveDefaults(t *testing.T) {
	cfg, o, err := resolveArgs(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := server.DefaultConfig(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("no flags: got %+v\nwant %+v", cfg, want)
	}
	if o.logLevel != "info" || o.logJSON || o.shutdownTimeout != 20*time.Second {
		t.Errorf("options: %+v", o)
	}
}

func TestResolvePrecedence(t *testing.T) {
	file := writeFile(t, `
# Kafka keys and flag names side by side.
offsets.topic.num.partitions: 6
group.max.size: 10
offsets.commit.timeout.ms: 1000
node-id: 2
data-dir: /file/data
kafka-addr: 0.0.0.0:19092
raft-addr: 0.0.0.0:19093
join: [a:7946, b:7946]
bootstrap-expect: 3
log-level: debug
shutdown-timeout: 3s
advertise-kafka-addr:
`)
	env := map[string]string{
		"KCOORD_CONFIG_FILE": file,
		"KCOORD_NODE_ID":     "3",
		"KCOORD_DATA_DIR":    "/env/data",
		"KCOORD_JOIN":        "c:7946",
		"KCOORD_CONFIG":      "group.max.size=20,offsets.commit.timeout.ms=2000",
		"KCOORD_LOG_JSON":    "true",
		"KCOORD_GOSSIP_ADDR": "", // empty: unset
	}
	args := []string{"--node-id", "4", "-c", "offsets.commit.timeout.ms=3000", "--raft-addr=127.0.0.1:29093"}

	cfg, o, err := resolveArgs(args, env)
	if err != nil {
		t.Fatal(err)
	}
	want := server.DefaultConfig()
	want.NodeID = 4                             // flag > env > file
	want.DataDir = "/env/data"                  // env > file
	want.KafkaAddr = "0.0.0.0:19092"            // file
	want.RaftAddr = "127.0.0.1:29093"           // flag > file
	want.Join = []string{"c:7946"}              // env replaces the file's list
	want.BootstrapExpect = 3                    // file
	want.OffsetsTopicNumPartitions = 6          // file
	want.GroupMaxSize = 20                      // env > file
	want.OffsetsCommitTimeout = 3 * time.Second // flag > env > file
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
	if o.logLevel != "debug" || !o.logJSON || o.shutdownTimeout != 3*time.Second {
		t.Errorf("options: level %q json %v timeout %v", o.logLevel, o.logJSON, o.shutdownTimeout)
	}
}

func TestResolveJoin(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  string
		args []string
		want []string
	}{
		{"none", "", "", nil, nil},
		{"file list", "join: [a:1, b:2]", "", nil, []string{"a:1", "b:2"}},
		{"file string", "join: a:1, b:2", "", nil, []string{"a:1", "b:2"}},
		{"env", "join: [a:1]", "c:3,d:4", nil, []string{"c:3", "d:4"}},
		{"flags", "join: [a:1]", "c:3", []string{"--join", "e:5", "--join=f:6,g:7"}, []string{"e:5", "f:6", "g:7"}},
		{"empty list in file", "join: []", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"KCOORD_JOIN": tt.env}
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config-file", writeFile(t, tt.file)}, args...)
			}
			cfg, _, err := resolveArgs(args, env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Join, tt.want) {
				t.Errorf("Join = %q, want %q", cfg.Join, tt.want)
			}
		})
	}
}

func TestResolveConfigFileFlagBeatsEnv(t *testing.T) {
	fromFlag := writeFile(t, "node-id: 11")
	fromEnv := writeFile(t, "node-id: 12")
	cfg, _, err := resolveArgs([]string{"--config-file", fromFlag}, map[string]string{"KCOORD_CONFIG_FILE": fromEnv})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 11 {
		t.Errorf("NodeID = %d, want 11 from --config-file", cfg.NodeID)
	}
}

func TestResolveKafkaPairs(t *testing.T) {
	cfg, _, err := resolveArgs([]string{
		"-c", "group.initial.rebalance.delay.ms=0",
		"--config", "offsets.topic.replication.factor=1, offsets.topic.num.partitions=4",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GroupInitialRebalanceDelay != 0 || cfg.OffsetsTopicReplicationFactor != 1 || cfg.OffsetsTopicNumPartitions != 4 {
		t.Errorf("got %+v", cfg)
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string // written and passed with --config-file when set
		env     map[string]string
		args    []string
		wantErr []string
	}{
		{"unknown kafka key", "", nil, []string{"-c", "no.such=1"}, []string{"--config", `"no.such"`}},
		{"pair without =", "", nil, []string{"-c", "group.max.size"}, []string{`"group.max.size"`, "key=value"}},
		{"bad kafka value", "", nil, []string{"-c", "group.max.size=many"}, []string{"group.max.size", `"many"`}},
		{"bad env kafka", "", map[string]string{"KCOORD_CONFIG": "group.max.size=0"}, nil, []string{"KCOORD_CONFIG", "group.max.size"}},
		{"bad env flag", "", map[string]string{"KCOORD_NODE_ID": "one"}, nil, []string{"KCOORD_NODE_ID", `"one"`}},
		{"bad env bool", "", map[string]string{"KCOORD_LOG_JSON": "yes please"}, nil, []string{"KCOORD_LOG_JSON"}},
		{"invalid config", "", nil, []string{"--bootstrap-expect", "0"}, []string{"bootstrap-expect"}},
		{"invalid addr", "", nil, []string{"--kafka-addr", "nowhere"}, []string{"kafka-addr"}},
		{"pprof without http", "", nil, []string{"--pprof", "--http-addr", ""}, []string{"pprof", "http-addr"}},
		{"session bounds", "", nil, []string{"-c", "group.min.session.timeout.ms=9000", "-c", "group.max.session.timeout.ms=8000"}, []string{"session.timeout"}},
		{"missing file", "", map[string]string{"KCOORD_CONFIG_FILE": "/nonexistent/kcoord.yaml"}, nil, []string{"/nonexistent/kcoord.yaml"}},
		{"file unknown key", "nodeid: 1", nil, nil, []string{"nodeid", "unknown key", "line 1"}},
		{"file config key", "config: a=b", nil, nil, []string{"config", "unknown key"}},
		{"file config-file key", "config-file: x.yaml", nil, nil, []string{"config-file", "unknown key"}},
		{"file bad kafka value", "group.max.size: lots", nil, nil, []string{"kcoord.yaml", "group.max.size", `"lots"`}},
		{"file kafka list", "group.max.size: [1, 2]", nil, nil, []string{"group.max.size", "scalar"}},
		{"file flag list", "node-id: [1, 2]", nil, nil, []string{"node-id", "scalar"}},
		{"file mapping value", "node-id: {a: 1}", nil, nil, []string{"node-id"}},
		{"file bad flag value", "bootstrap-expect: three", nil, nil, []string{"kcoord.yaml", "bootstrap-expect", `"three"`}},
		{"file not a mapping", "- a\n- b\n", nil, nil, []string{"mapping"}},
		{"file bad yaml", "a: [", nil, nil, []string{"kcoord.yaml"}},
		{"file duplicate", "node-id: 1\nnode-id: 2\n", nil, nil, []string{"node-id", "twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config-file", writeFile(t, tt.file)}, args...)
			}
			_, _, err := resolveArgs(args, tt.env)
			if err == nil {
				t.Fatal("resolve accepted it")
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestResolveEmptyFile(t *testing.T) {
	cfg, _, err := resolveArgs([]string{"--config-file", writeFile(t, "# nothing\n")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, server.DefaultConfig()) {
		t.Errorf("empty file changed the config: %+v", cfg)
	}
}

// TestJoinWithoutBootstrapExpectJoinsOnly: --join without --bootstrap-expect
// (from any source) joins an existing cluster and never bootstraps
// (BootstrapExpect 0); a bootstrap-expect given anywhere wins; with no flags
// at all the node bootstraps alone.
func TestJoinWithoutBootstrapExpectJoinsOnly(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want int
	}{
		{"no flags", "", nil, nil, 1},
		{"--join", "", nil, []string{"--join", "a:7946"}, 0},
		{"--join with --bootstrap-expect 3", "", nil, []string{"--join", "a:7946", "--bootstrap-expect", "3"}, 3},
		{"--join with --bootstrap-expect 1", "", nil, []string{"--join", "a:7946", "--bootstrap-expect=1"}, 1},
		{"KCOORD_JOIN", "", map[string]string{"KCOORD_JOIN": "a:7946"}, nil, 0},
		{"KCOORD_JOIN with KCOORD_BOOTSTRAP_EXPECT", "", map[string]string{"KCOORD_JOIN": "a:7946", "KCOORD_BOOTSTRAP_EXPECT": "3"}, nil, 3},
		{"join in the file", "join: [a:7946]", nil, nil, 0},
		{"join and bootstrap-expect in the file", "join: [a:7946]\nbootstrap-expect: 2", nil, nil, 2},
		{"env join, file bootstrap-expect", "bootstrap-expect: 1", map[string]string{"KCOORD_JOIN": "a:7946"}, nil, 1},
		{"bootstrap-expect without join", "", nil, []string{"--bootstrap-expect", "3"}, 3},
		{"an empty join list", "join: []", nil, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config-file", writeFile(t, tt.file)}, args...)
			}
			cfg, _, err := resolveArgs(args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BootstrapExpect != tt.want {
				t.Errorf("BootstrapExpect = %d, want %d", cfg.BootstrapExpect, tt.want)
			}
		})
	}
	for _, args := range [][]string{{"--join", "a:7946", "--bootstrap-expect", "0"}, {"--bootstrap-expect", "-1"}} {
		if _, _, err := resolveArgs(args, nil); err == nil || !strings.Contains(err.Error(), "leave it unset with --join") {
			t.Errorf("%v: %v, want an error saying to leave it unset", args, err)
		}
	}
}

// TestServerConfigOfJoinOnlyNode: the server takes a join-only node's
// configuration (BootstrapExpect 0: join, never bootstrap) as it is.
func TestServerConfigOfJoinOnlyNode(t *testing.T) {
	cfg, _, err := resolveArgs([]string{"--join", "a:7946"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BootstrapExpect != 0 || cfg.Raft != nil {
		t.Fatalf("join-only node: bootstrap-expect %d", cfg.BootstrapExpect)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("server rejects a join-only node: %v", err)
	}
}

// TestKafkaListValuesKeepTheirCommas: -c takes Kafka's list values and
// distinguished names whole, beside other pairs in the same argument.
func TestKafkaListValuesKeepTheirCommas(t *testing.T) {
	cfg, _, err := resolveArgs([]string{"-c", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,group.max.size=7",
		"-c", "super.users=User:CN=billing,OU=payments,O=example;User:admin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SASLEnabledMechanisms != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" || cfg.GroupMaxSize != 7 ||
		cfg.SuperUsers != "User:CN=billing,OU=payments,O=example;User:admin" {
		t.Fatalf("mechanisms %q, group.max.size %d, super.users %q", cfg.SASLEnabledMechanisms, cfg.GroupMaxSize, cfg.SuperUsers)
	}
	if _, _, err := resolveArgs([]string{"-c", "no.such.key=1"}, nil); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}

// TestSuperuserPasswordComesFromAFileOrTheEnvironment, never a flag.
func TestSuperuserPasswordComesFromAFileOrTheEnvironment(t *testing.T) {
	sasl := []string{"-c", "sasl.enabled.mechanisms=SCRAM-SHA-512", "--sasl-superuser", "admin"}
	cfg, _, err := resolveArgs(sasl, map[string]string{envSuperuserPassword: "from-env"})
	if err != nil || cfg.SASLSuperuserPassword != "from-env" {
		t.Fatalf("from the environment: %q, %v", cfg.SASLSuperuserPassword, err)
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err = resolveArgs(append(sasl, "--sasl-superuser-password-file", file), nil)
	if err != nil || cfg.SASLSuperuserPassword != "from-file" {
		t.Fatalf("from the file: %q, %v", cfg.SASLSuperuserPassword, err)
	}
	if _, _, err := resolveArgs(append(sasl, "--sasl-superuser-password-file", file), map[string]string{envSuperuserPassword: "x"}); err == nil {
		t.Fatal("a password given twice was accepted")
	}
	if _, _, err := resolveArgs(sasl, nil); err == nil || !strings.Contains(err.Error(), "needs a password") {
		t.Fatalf("no password: %v", err)
	}
}
