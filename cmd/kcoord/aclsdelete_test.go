package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/server"
)

// TestACLsDeleteRemovesWhatTheSameCreateLineMakes: --allow-host says "(default
// *)", and kafka-acls.sh --remove --allow-principal P --group G (no
// --allow-host, no --operation) removes exactly the ACL (P, host *, All,
// ALLOW) on G (AclCommand.getHosts defaults the host to "*", the
// operation defaults to All). kcoord's filter uses ANY host and ANY
// operation, so it also deletes P's ACLs restricted to one host, and its
// Read ACL, which the same kafka-acls.sh command line leaves alone.
func TestACLsDeleteRemovesWhatTheSameCreateLineMakes(t *testing.T) {
	cfg := server.TestConfig(t.TempDir())
	cfg.SASLEnabledMechanisms, cfg.SASLSuperuser, cfg.SASLSuperuserPassword = "SCRAM-SHA-512", "admin", "admin-pw"
	s := server.StartTestServer(t, cfg)
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
		root.SetArgs(append([]string{"acls", "--bootstrap-server", s.KafkaAddr().String(), "--timeout", "10s",
			"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin", "--sasl-password-file", passFile}, args...))
		err := root.Execute()
		return out.String(), err
	}
	if out, err := run("create", "--allow-principal", "User:alice", "--allow-host", "10.0.0.5", "--operation", "Read", "--group", "billing"); err != nil {
		t.Fatalf("create: %q %v", out, err)
	}
	if out, err := run("create", "--allow-principal", "User:alice", "--operation", "All", "--group", "billing"); err != nil {
		t.Fatalf("create: %q %v", out, err)
	}
	out, err := run("delete", "--allow-principal", "User:alice", "--group", "billing")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "from 10.0.0.5") {
		t.Errorf("delete without --allow-host (default *) deleted alice's ACL from host 10.0.0.5:\n%s", out)
	}
	if strings.Contains(out, " READ ") || strings.Contains(out, "Read ") {
		t.Errorf("delete without --operation deleted alice's READ ACL too (kafka-acls.sh: only All):\n%s", out)
	}
}
