package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kcoord/kcoord/server"
)

// TestUsersCreateListDelete runs "kcoord users" as the bootstrap
// superuser against a SASL node: a user it creates logs in, shows in the
// list with both mechanisms, and can no longer log in once deleted.
func TestUsersCreateListDelete(t *testing.T) {
	cfg := server.TestConfig(t.TempDir())
	cfg.SASLEnabledMechanisms, cfg.SASLSuperuser, cfg.SASLSuperuserPassword = "SCRAM-SHA-512,SCRAM-SHA-256", "admin", "admin-pw"
	s := server.StartTestServer(t, cfg)
	addr := s.KafkaAddr().String()
	passFile := filepath.Join(t.TempDir(), "admin.pass")
	if err := os.WriteFile(passFile, []byte("admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"users", "--bootstrap-server", addr, "--timeout", "10s",
			"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin", "--sasl-password-file", passFile}, args...))
		err := root.Execute()
		return out.String(), err
	}
	login := func(pass string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: pass}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}

	t.Setenv(envUserPassword, "alice-pw")
	out, err := run("create", "alice")
	if err != nil || out != "Set the SCRAM-SHA-512 credential of user alice.\nSet the SCRAM-SHA-256 credential of user alice.\n" {
		t.Fatalf("create: %q, %v", out, err)
	}
	if err := login("alice-pw"); err != nil {
		t.Fatalf("alice logging in: %v", err)
	}
	out, err = run("list")
	if err != nil || !strings.Contains(out, "alice  SCRAM-SHA-256  4096") || !strings.Contains(out, "alice  SCRAM-SHA-512  4096") {
		t.Fatalf("list:\n%s%v", out, err)
	}
	if _, err := run("create", "bob", "--iterations", "100"); err == nil {
		t.Fatal("a credential of 100 iterations was accepted")
	}
	out, err = run("delete", "alice")
	if err != nil || strings.Count(out, "Deleted the") != 2 {
		t.Fatalf("delete: %q, %v", out, err)
	}
	if err := login("alice-pw"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a deleted user logging in: %v", err)
	}
	if _, err := run("delete", "alice"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("deleting a user that does not exist: %v", err)
	}
	t.Setenv(envSASLPassword, "")
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"users", "list", "--bootstrap-server", addr, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), envSASLPassword) {
		t.Fatalf("no password given: %v", err)
	}
}
