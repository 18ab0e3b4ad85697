package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/server"
)

func TestBenchCommitsPrintsThroughputAndLatency(t *testing.T) {
	s := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"bench", "commits", "--bootstrap-server", s.KafkaAddr().String(), "--clients", "2", "--duration", "300ms", "--warmup", "100ms"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "2 clients: ") || !strings.Contains(got, "commits/s, p50 ") || !strings.Contains(got, " 0 errors") {
		t.Errorf("output %q", got)
	}
}

func TestBenchCommitsRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--bootstrap-server", " , "},
		{"--duration", "0s"},
		{"--clients", "0", "--bootstrap-server", "127.0.0.1:1"},
	} {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"bench", "commits"}, args...))
		if err := root.Execute(); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
