package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/server"
)

func TestTopicsCreateListDescribeDelete(t *testing.T) {
	s := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	run := func(args ...string) (string, error) {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"topics", "--bootstrap-server", s.KafkaAddr().String()}, args...))
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("create", "events", "--partitions", "3")
	if err != nil || out != "Created topic events.\n" {
		t.Fatalf("create: %q, %v", out, err)
	}
	out, err = run("create", "events", "--partitions", "3")
	if err == nil || !strings.Contains(out, "Error while executing topic command : Topic 'events' already exists.") {
		t.Errorf("creating it again: %q, %v", out, err)
	}
	if _, err := run("create", "events", "--partitions", "3", "--if-not-exists"); err != nil {
		t.Errorf("--if-not-exists: %v", err)
	}
	if out, err := run("create", "none", "--partitions", "0"); err == nil || !strings.Contains(out, "The partitions must be greater than 0") {
		t.Errorf("0 partitions: %q, %v", out, err)
	}
	if _, err := run("create", "more", "--partitions", "1"); err != nil {
		t.Fatal(err)
	}

	out, err = run("list")
	if err != nil || !strings.Contains(out, "events\n") || !strings.Contains(out, "more\n") {
		t.Errorf("list: %q, %v", out, err)
	}

	out, err = run("describe", "events")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "Topic: events\tTopicId: ") || !strings.Contains(lines[0], "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: ") {
		t.Fatalf("describe:\n%s", out)
	}
	for i, line := range lines[1:] {
		if want := "\tTopic: events\tPartition: " + string(rune('0'+i)) + "\tLeader: 1\tReplicas: 1\tIsr: 1"; !strings.HasPrefix(line, want) {
			t.Errorf("partition line %q, want it to start %q", line, want)
		}
	}
	if out, err := run("describe", "nope"); err == nil || !strings.Contains(out, "Topic 'nope' does not exist as expected") {
		t.Errorf("describing a topic that does not exist: %q, %v", out, err)
	}

	if out, err := run("delete", "events"); err != nil || out != "" {
		t.Fatalf("delete: %q, %v", out, err)
	}
	if out, _ := run("list"); strings.Contains(out, "events") {
		t.Errorf("events listed after its deletion: %q", out)
	}
	if out, err := run("delete", "events"); err == nil || !strings.Contains(out, "Topic 'events' does not exist as expected") {
		t.Errorf("deleting it again: %q, %v", out, err)
	}
	if _, err := run("delete", "events", "--if-exists"); err != nil {
		t.Errorf("--if-exists: %v", err)
	}
}
