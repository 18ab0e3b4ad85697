package main

import (
	"bytes"
	"testing"
)

func TestBenchShardsRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--nodes", "2"},
		{"--shards", "0"},
		{"--duration", "0s"},
		{"--idle", "0s"},
		{"--phase-timeout", "0s"},
	} {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"bench", "shards", "--dir", t.TempDir()}, args...))
		if err := root.Execute(); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
