package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kcoord/kcoord/bench"
)

// Sizes that do not fit are refused before any process starts.
func TestBenchLoadRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--groups", "0"},
		{"--groups", "100,0"},
		{"--partitions", "0"},
		{"--committers", "0"},
		{"--groups", "5", "--segments", "6"},
		{"--failover-trials", "-1"},
	} {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"bench", "load", "--dir", t.TempDir()}, args...))
		if err := root.Execute(); !errors.Is(err, bench.ErrLoadConfig) {
			t.Errorf("%v: %v, want ErrLoadConfig", args, err)
		}
	}
}
