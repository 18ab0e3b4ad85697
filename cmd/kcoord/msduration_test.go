package main

import (
	"testing"
	"time"
)

// --timeout takes Kafka's tools' milliseconds and Go's durations.
func TestMsDurationTakesMillisecondsOrADuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"5000": 5 * time.Second, "250": 250 * time.Millisecond, "2s": 2 * time.Second, "1m30s": 90 * time.Second} {
		var d time.Duration
		if err := (msDuration{&d}).Set(in); err != nil || d != want {
			t.Errorf("--timeout %s: %v, %v; want %v", in, d, err, want)
		}
	}
	var d time.Duration
	if err := (msDuration{&d}).Set("soon"); err == nil {
		t.Error("--timeout soon was taken")
	}
}

// The groups commands take --timeout in milliseconds.
func TestGroupsTakeATimeoutInMilliseconds(t *testing.T) {
	f := newGroupsFixture(t)
	f.commit(t, "g", map[int32]int64{0: 1})
	out, _, err := f.groups(t, "list", "--timeout", "10000")
	if err != nil || out != "g\n" {
		t.Fatalf("list --timeout 10000: %q, %v", out, err)
	}
}
