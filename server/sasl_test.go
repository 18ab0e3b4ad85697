package server

import (
	"context"
	"crypto/tls"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	testSuperuser = "admin"
	testSuperPass = "admin-secret"
)

// startSASLServer starts a node serving TLS (a certificate of ca) and
// SASL with every mechanism, admin/admin-secret its bootstrap superuser.
func startSASLServer(t *testing.T, ca *testCA, mutate func(*Config)) *Server {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	c, k := ca.issue(t, "kcoord", 2, true)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	cfg := TestConfig(t.TempDir())
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	if err := cfg.SetKafkaConfig("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"); err != nil {
		t.Fatal(err)
	}
	cfg.SASLSuperuser, cfg.SASLSuperuserPassword = testSuperuser, testSuperPass
	if mutate != nil {
		mutate(&cfg)
	}
	return StartTestServer(t, cfg)
}

// saslAdmin is a kadm client over TLS logged in with opt.
func saslAdmin(t *testing.T, addr string, ca *testCA, opt kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsClient(ca, nil)), opt, kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func scram256(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
}

func scram512(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestUsersCreatedByTheSuperuserLogIn: the bootstrap superuser creates
// users through AlterUserScramCredentials (kadm, as kafka-configs.sh
// does); each logs in over TLS with its mechanism, a wrong password is
// refused, a deleted user can no longer log in, and only a superuser may
// manage users.
func TestUsersCreatedByTheSuperuserLogIn(t *testing.T) {
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	addr := s.KafkaAddr().String()
	tlsOpt := kgo.DialTLSConfig(tlsClient(ca, nil))
	ctx := testCtx(t, 60*time.Second)

	adm := saslAdmin(t, addr, ca, scram512(testSuperuser, testSuperPass))
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-pw"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("creating users: %v, %v", err, altered.Error())
	}

	if err := metadata(t, addr, tlsOpt, scram256("alice", "alice-pw")); err != nil {
		t.Fatalf("alice over SCRAM-SHA-256: %v", err)
	}
	if err := metadata(t, addr, tlsOpt, scram512("bob", "bob-pw")); err != nil {
		t.Fatalf("bob over SCRAM-SHA-512: %v", err)
	}
	if err := metadata(t, addr, tlsOpt, kgo.SASL(plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism())); err != nil {
		t.Fatalf("bob over PLAIN: %v", err)
	}
	for name, opt := range map[string]kgo.Opt{
		"wrong password":   scram256("alice", "guess"),
		"wrong mechanism":  scram512("alice", "alice-pw"), // alice has no SCRAM-SHA-512 credential
		"unknown user":     scram256("carol", "alice-pw"),
		"PLAIN, wrong one": kgo.SASL(plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()),
	} {
		if err := metadata(t, addr, tlsOpt, opt); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := described["alice"], described["bob"]; len(described) != 2 || len(a.CredInfos) != 1 ||
		a.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 4096}) ||
		len(b.CredInfos) != 1 || b.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) {
		t.Fatalf("described %+v", described)
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "carol"); err != nil || !errors.Is(d["carol"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describing a user without credentials: %+v, %v", d, err)
	}

	// A user is not a superuser: it may neither list nor change users.
	alice := saslAdmin(t, addr, ca, scram256("alice", "alice-pw"))
	if _, err := alice.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describing users: %v", err)
	}
	altered, err = alice.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Password: "mine"}})
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(altered["alice"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice altering herself: %+v, %v", altered, err)
	}

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered.Error() != nil {
		t.Fatalf("deleting alice: %v, %v", err, altered.Error())
	}
	if err := metadata(t, addr, tlsOpt, scram256("alice", "alice-pw")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a deleted user logged in: %v", err)
	}
}

// TestAlterUserScramCredentialsRefusesWhatKafkaRefuses sends raw
// requests kadm would not build.
func TestAlterUserScramCredentialsRefusesWhatKafkaRefuses(t *testing.T) {
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()), kgo.DialTLSConfig(tlsClient(ca, nil)),
		scram512(testSuperuser, testSuperPass))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 30*time.Second)
	up := func(user string, mech int8, iters int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = user, mech, iters
		u.Salt, u.SaltedPassword = []byte("salt"), make([]byte, 32)
		return u
	}
	del := func(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("few", 1, 1000), up("many", 2, 20000), up("", 1, 4096), up("unknown", 3, 4096),
		up("twice", 1, 4096), up("twice", 2, 4096), up(testSuperuser, 1, 4096), up("fine", 2, 4096),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("ghost", 1)}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		err *kerr.Error
		msg string
	}{
		"few":         {kerr.UnacceptableCredential, "Too few iterations"},
		"many":        {kerr.UnacceptableCredential, "Too many iterations"},
		"":            {kerr.UnacceptableCredential, "Username must not be empty"},
		"unknown":     {kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"},
		"twice":       {kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"},
		testSuperuser: {kerr.UnacceptableCredential, "User admin is the bootstrap superuser"},
		"ghost":       {kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"},
		"fine":        {nil, ""},
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		w := want[r.User]
		got := kerr.ErrorForCode(r.ErrorCode)
		if got != w.err && !(w.err == nil && got == nil) {
			t.Errorf("%q: %v, want %v", r.User, got, w.err)
		}
		if w.msg != "" && (r.ErrorMessage == nil || !strings.HasPrefix(*r.ErrorMessage, w.msg)) {
			t.Errorf("%q: message %v, want %q", r.User, r.ErrorMessage, w.msg)
		}
	}
}

// TestSaramaLogsInWithPlainOverTLS: sarama's client, with SASL/PLAIN
// over TLS as a user the superuser created and granted its group, finds
// the group's coordinator.
func TestSaramaLogsInWithPlainOverTLS(t *testing.T) {
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	addr := s.KafkaAddr().String()
	ctx := testCtx(t, 30*time.Second)
	adm := saslAdmin(t, addr, ca, scram512(testSuperuser, testSuperPass))
	if r, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "sam", Mechanism: kadm.ScramSha512, Password: "sam-pw"}}); err != nil || r.Error() != nil {
		t.Fatalf("creating sam: %v, %v", err, r.Error())
	}
	if r, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:sam").Groups("sarama-group").Operations(kadm.OpRead)); err != nil || r[0].Err != nil {
		t.Fatalf("granting sam the group: %v, %+v", err, r)
	}
	newSarama := func(pass string) (sarama.Client, error) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tlsClient(ca, nil)
		cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "sam", pass
		cfg.Metadata.Retry.Max = 0
		return sarama.NewClient([]string{addr}, cfg)
	}
	cl, err := newSarama("sam-pw")
	if err != nil {
		t.Fatalf("sarama over PLAIN: %v", err)
	}
	defer cl.Close()
	if b, err := cl.Coordinator("sarama-group"); err != nil || b == nil {
		t.Fatalf("FindCoordinator through sarama: %v", err)
	}
	if _, err := newSarama("wrong"); err == nil || !strings.Contains(err.Error(), "Invalid username or password") {
		t.Fatalf("sarama with a wrong password: %v", err)
	}
}

// TestKcatLogsInWithScramOverTLS runs librdkafka (kcat -L) with
// SCRAM-SHA-256 over TLS, verifying the listener's certificate against
// the CA.
func TestKcatLogsInWithScramOverTLS(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	addr := s.KafkaAddr().String()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, caFile, ca.pem)
	ctx := testCtx(t, 60*time.Second)
	adm := saslAdmin(t, addr, ca, scram512(testSuperuser, testSuperPass))
	if r, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kim", Mechanism: kadm.ScramSha256, Password: "kim-pw"}}); err != nil || r.Error() != nil {
		t.Fatalf("creating kim: %v, %v", err, r.Error())
	}
	run := func(pass string) (string, error) {
		cmd := exec.CommandContext(ctx, kcat, "-L", "-b", addr, "-m", "10",
			"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256",
			"-X", "sasl.username=kim", "-X", "sasl.password="+pass,
			"-X", "ssl.ca.location="+caFile)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("kim-pw")
	if err != nil || !strings.Contains(out, "1 brokers:") {
		t.Fatalf("kcat over SCRAM-SHA-256 and TLS: %v\n%s", err, out)
	}
	if out, err := run("wrong"); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
}

// TestPlaintextAndUnauthenticatedClientsAreRefused: on a TLS and SASL
// listener, a plaintext client gets no answer, and a TLS client that does
// not authenticate gets nothing but ApiVersions.
func TestPlaintextAndUnauthenticatedClientsAreRefused(t *testing.T) {
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	addr := s.KafkaAddr().String()
	if err := metadata(t, addr, scram512(testSuperuser, testSuperPass)); err == nil {
		t.Fatal("a plaintext client was served on the TLS listener")
	}
	if err := metadata(t, addr, kgo.DialTLSConfig(tlsClient(ca, nil))); err == nil {
		t.Fatal("a client without SASL was served")
	}
	if err := metadata(t, addr, kgo.DialTLSConfig(tlsClient(ca, nil)), scram512(testSuperuser, testSuperPass)); err != nil {
		t.Fatalf("the superuser: %v", err)
	}
}

// TestMutualTLSPrincipalIsTheCertificateSubject: under mutual TLS
// without SASL, a client's principal is its certificate's subject, so
// naming it in super.users lets it manage users and nobody else.
func TestMutualTLSPrincipalIsTheCertificateSubject(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "s.pem"), filepath.Join(dir, "s-key.pem"), filepath.Join(dir, "ca.pem")
	c, k := ca.issue(t, "kcoord", 2, true)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	writeFile(t, caFile, ca.pem)
	cfg := TestConfig(t.TempDir())
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = certFile, keyFile, caFile
	cfg.SuperUsers = "User:CN=operator"
	s := StartTestServer(t, cfg)
	ctx := testCtx(t, 30*time.Second)
	client := func(cn string) *kadm.Client {
		cp, kp := ca.issue(t, cn, 3, false)
		pair, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()), kgo.DialTLSConfig(tlsClient(ca, &pair)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	if _, err := client("operator").DescribeUserSCRAMs(ctx); err != nil {
		t.Fatalf("User:CN=operator, a superuser: %v", err)
	}
	if _, err := client("someone").DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("User:CN=someone: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

func TestSASLSettingsAreChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"GSSAPI":                {func(c *Config) { c.SASLEnabledMechanisms = "GSSAPI" }, "GSSAPI"},
		"superuser, no SASL":    {func(c *Config) { c.SASLSuperuser, c.SASLSuperuserPassword = "a", "b" }, "sasl-superuser needs SASL"},
		"superuser, no pass":    {func(c *Config) { c.SASLEnabledMechanisms, c.SASLSuperuser = "PLAIN", "a" }, "needs a password"},
		"bad super.users entry": {func(c *Config) { c.SuperUsers = "alice" }, "super.users"},
	} {
		cfg := TestConfig(t.TempDir())
		tc.mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", name, err, tc.want)
		}
	}
}
