package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/server"
)

// TestACLsCreateListDelete runs "kcoord acls" as the bootstrap superuser
// with kafka-acls.sh's flags.
func TestACLsCreateListDelete(t *testing.T) {
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
	out, err := run("create", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--group", "billing")
	if err != nil || strings.Count(out, "Created ALLOW User:alice") != 2 {
		t.Fatalf("create: %q, %v", out, err)
	}
	if out, err = run("create", "--deny-principal", "User:bob", "--operation", "All", "--topic", "ord", "--resource-pattern-type", "prefixed"); err != nil {
		t.Fatalf("create a prefixed deny: %q, %v", out, err)
	}
	out, err = run("list")
	if err != nil || !strings.Contains(out, "GROUP     billing") && !strings.Contains(out, "billing") ||
		!strings.Contains(out, "PREFIXED") || strings.Count(out, "\n") != 4 {
		t.Fatalf("list:\n%s%v", out, err)
	}
	out, err = run("list", "--principal", "User:bob")
	if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, "User:bob") {
		t.Fatalf("list --principal:\n%s%v", out, err)
	}
	if _, err := run("create", "--allow-principal", "User:alice", "--group", "g"); err == nil {
		t.Fatal("a create without an operation was accepted")
	}
	out, err = run("delete", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--group", "billing")
	if err != nil || strings.Count(out, "Deleted ALLOW User:alice") != 2 {
		t.Fatalf("delete: %q, %v", out, err)
	}
	out, err = run("list")
	if err != nil || strings.Count(out, "\n") != 2 {
		t.Fatalf("list after delete:\n%s%v", out, err)
	}
}
