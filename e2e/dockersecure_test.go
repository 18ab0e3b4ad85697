package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The secured docker-compose cluster test: docker-compose.secure.yml, run
// with the harness of docker_test.go (dockerCompose: image, free ports,
// health, teardown). Everything in this file is prefixed dsc/dockerSecure.
const (
	// dockerSecureFile is the compose file under test, at the module root.
	dockerSecureFile = "docker-compose.secure.yml"
	// dockerSecureSuperuser is the bootstrap superuser the file names.
	dockerSecureSuperuser = "admin"
	// dockerSecureCertsWithin bounds kcoord certs (and building the binary
	// that runs it, when no other test built it yet).
	dockerSecureCertsWithin = 5 * time.Minute
	// dockerSecureUserWithin bounds how long after the cluster is healthy
	// the superuser's AlterUserScramCredentials must succeed, and the new
	// user log in through every node.
	dockerSecureUserWithin = 45 * time.Second
)

// TestDockerSecureCluster starts the three containers of
// docker-compose.secure.yml (Kafka over TLS with SASL, gossip encryption,
// Raft mutual TLS) on certificates, a gossip key and a superuser password
// that `kcoord certs` made, and checks what a user of the secured cluster
// relies on: a franz-go client that trusts the generated CA and logs in as
// the bootstrap superuser with SCRAM-SHA-512 creates a user
// (AlterUserScramCredentials, replicated by the metadata Raft group over
// mutual TLS); that user logs in through every node, with SCRAM-SHA-512 and
// with PLAIN (the last of the -c list: the file's commas were kept); a
// wrong password is refused with SASL_AUTHENTICATION_FAILED; and neither a
// plaintext client nor a TLS client without SASL gets an answer.
//
// Gated as TestDockerCluster is: skipped without a Docker engine and
// compose, and with -short; `make test-docker-secure` runs it alone. The
// project runs on free host ports from a temporary directory holding the
// compose file and its ./certs, and is removed when the test ends, passed
// or failed.
func TestDockerSecureCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("docker-compose cluster test skipped in -short mode")
	}
	// Made before newDockerCompose, so that it is removed after the
	// project is down (cleanups run last first).
	projectDir := t.TempDir()
	dc := newDockerCompose(t) // skips without Docker
	dc.buildImage(t)
	certs := filepath.Join(projectDir, "certs")
	dscMakeCerts(t, certs)
	dscStage(t, dc, projectDir)

	ctx := testContext(t, dockerBudget)
	dc.up(ctx, t)
	dc.waitHealthy(ctx, t, dockerHealthyWithin, dc.nodes...)

	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	// No ServerName: franz-go sets it to the host it dials, 127.0.0.1,
	// which the node certificates name.
	tlsCfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	adminPass := dscFirstLine(t, filepath.Join(certs, "superuser.password"))

	seeds := dc.kafkaAddrs(dc.nodes...)
	adm := kadm.NewClient(newClient(t, seeds[0],
		kgo.SeedBrokers(seeds...),
		kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: dockerSecureSuperuser, Pass: adminPass}.AsSha512Mechanism()),
	))

	user, pass := fmt.Sprintf("e2e-user-%d", rand.IntN(1e6)), fmt.Sprintf("pw-%d-%d", rand.Uint64(), rand.Uint64())
	dcPoll(ctx, t, "the superuser creating "+user, dockerSecureUserWithin, 500*time.Millisecond, func(ctx context.Context) error {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass}})
		if err != nil {
			return err
		}
		if r := res[user]; r.Err != nil {
			return fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
		}
		return nil
	})
	// What one node acknowledged, every node knows: the user is described
	// and logs in through every node at once, with no retry.
	described, err := adm.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[user]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 {
		t.Fatalf("the superuser describing %s right after creating it: %+v, want one SCRAM-SHA-512 credential", user, d)
	}

	userSCRAM := scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	for _, n := range dc.nodes {
		if err := dscMetadata(ctx, n.kafkaAddr(), kgo.DialTLSConfig(tlsCfg), kgo.SASL(userSCRAM)); err != nil {
			t.Errorf("%s logging in with SCRAM-SHA-512 through %s right after its creation: %v", user, n.service, err)
		}
	}
	first := dc.nodes[0]
	userPlain := plain.Auth{User: user, Pass: pass}.AsMechanism()
	if err := dscMetadata(ctx, first.kafkaAddr(), kgo.DialTLSConfig(tlsCfg), kgo.SASL(userPlain)); err != nil {
		t.Errorf("%s logging in with PLAIN through %s: %v", user, first.service, err)
	}
	for _, mech := range []sasl.Mechanism{
		scram.Auth{User: user, Pass: pass + "x"}.AsSha512Mechanism(),
		plain.Auth{User: user, Pass: pass + "x"}.AsMechanism(),
	} {
		if err := dscMetadata(ctx, first.kafkaAddr(), kgo.DialTLSConfig(tlsCfg), kgo.SASL(mech)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("a wrong password with %s: %v, want SASL_AUTHENTICATION_FAILED", mech.Name(), err)
		}
	}

	handshakeFailures := func() float64 {
		body, _, err := dc.get(ctx, first, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := dcMetric(body, "kcoord_transport_tls_handshake_failures_total")
		return v
	}
	before := handshakeFailures()
	if err := dscMetadata(ctx, first.kafkaAddr()); err == nil {
		t.Errorf("a plaintext client was answered by %s", first.service)
	} else {
		t.Logf("a plaintext client: %v", err)
	}
	dcPoll(ctx, t, "the plaintext client counted as a failed TLS handshake", 10*time.Second, 200*time.Millisecond, func(context.Context) error {
		if after := handshakeFailures(); after <= before {
			return fmt.Errorf("kcoord_transport_tls_handshake_failures_total %v, %v before the plaintext client", after, before)
		}
		return nil
	})
	if err := dscMetadata(ctx, first.kafkaAddr(), kgo.DialTLSConfig(tlsCfg)); err == nil {
		t.Errorf("a TLS client that did not log in was answered by %s", first.service)
	} else {
		t.Logf("a TLS client without SASL: %v", err)
	}
}

// dscMakeCerts runs `kcoord certs` for the three services, as `make certs`
// does.
func dscMakeCerts(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerSecureCertsWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcoordBinary(t), "certs", "--dir", dir, "--hosts", "kcoord1,kcoord2,kcoord3", "--clients", "app")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	t.Logf("kcoord certs:\n%s", strings.TrimSpace(string(out)))
}

// dscStage makes dir the project's directory: docker-compose.secure.yml
// copied in as the docker-compose.yml dc runs, beside the ./certs it
// mounts. The image is built already (buildImage needs the module root).
// The project's ports go to the file's variables.
func dscStage(t *testing.T, dc *dockerCompose, dir string) {
	t.Helper()
	file, err := os.ReadFile(filepath.Join(dc.root, dockerSecureFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	dc.root = dir
	for _, n := range dc.nodes {
		dc.env = append(dc.env,
			fmt.Sprintf("SECURE_KCOORD%d_KAFKA_PORT=%d", n.id, n.kafkaPort),
			fmt.Sprintf("SECURE_KCOORD%d_HTTP_PORT=%d", n.id, n.httpPort),
		)
	}
}

// dscMetadata sends one Metadata request to addr itself (not to a broker
// it names), on a new connection with opts (TLS, SASL), and returns its
// error. kgo does not retry a request sent to one broker.
func dscMetadata(ctx context.Context, addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.WithLogger(kgo.BasicLogger(io.Discard, kgo.LogLevelNone, nil)),
	}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// dscFirstLine is a file's first line, as --sasl-superuser-password-file
// reads it.
func dscFirstLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}
