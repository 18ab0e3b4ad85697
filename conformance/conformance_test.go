package conformance

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// scenarios lists every scenario of the suite.
func scenarios() []Scenario {
	var all []Scenario
	for _, part := range [][]Scenario{
		membershipScenarios,
		staticScenarios,
		errorScenarios,
		adminScenarios,
		retentionScenarios,
		rebalanceScenarios,
		consumerScenarios,
		precheckScenarios,
	} {
		all = append(all, part...)
	}
	return all
}

// TestConformance plays every scenario against kfake and against kcoord,
// concurrently and each with servers of its own, and compares kcoord's
// transcript with Kafka's: kfake's lines, except where a step states
// Kafka's answer.
func TestConformance(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			cfg := sc.Config.WithDefaults()
			kfakeAddr, kcoordAddr := startKfake(t, cfg), startKcoord(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var (
				wg                  sync.WaitGroup
				kfake, kcoord       []string
				kfakeErr, kcoordErr error
			)
			wg.Go(func() { kfake, kfakeErr = Run(ctx, kfakeAddr, true, sc) })
			wg.Go(func() { kcoord, kcoordErr = Run(ctx, kcoordAddr, false, sc) })
			wg.Wait()
			if kfakeErr != nil {
				t.Fatalf("playing against kfake: %v", kfakeErr)
			}
			if kcoordErr != nil {
				t.Fatalf("playing against kcoord: %v", kcoordErr)
			}
			compare(t, sc, kfake, kcoord)
		})
	}
}

// compare checks kcoord's transcript against Kafka's and prints both side
// by side on a mismatch.
func compare(t *testing.T, sc Scenario, kfake, kcoord []string) {
	t.Helper()
	leaves := sc.Leaves()
	var (
		table strings.Builder
		notes []string
		bad   int
	)
	width := 0
	for _, l := range kcoord {
		width = max(width, min(len(l), 110))
	}
	for i, s := range leaves {
		want, mark := kfake[i], " "
		if line, why, ok := s.Override(); ok {
			want, mark = line, "*"
			if kfake[i] == line {
				t.Errorf("step %d: kfake now answers as Kafka does; drop the override (%s)", i+1, why)
			}
		}
		if want == "" && kcoord[i] == "" {
			continue
		}
		eq := "  "
		if kcoord[i] != want {
			eq, bad = "≠ ", bad+1
			if mark == "*" {
				notes = append(notes, fmt.Sprintf("  step %d: kfake answers %q\n    Kafka: %s", i+1, kfake[i], s.why))
			}
		}
		fmt.Fprintf(&table, "%3d %s%-*s | %s%s\n", i+1, eq, width, kcoord[i], mark, want)
	}
	if bad == 0 {
		if testing.Verbose() {
			t.Logf("%s: transcript (kcoord | Kafka)\n%s", sc.Name, table.String())
		}
		return
	}
	t.Errorf("%s: kcoord departs from Kafka at %d of %d steps\n%3s   %-*s | %s\n%s%s",
		sc.Name, bad, len(leaves), "#", width, "kcoord", "Kafka (kfake's answer, or *stated)",
		table.String(), strings.Join(notes, "\n"))
}

// kafkaSource matches a reference to an Apache Kafka source file.
var kafkaSource = regexp.MustCompile(`[A-Za-z]+\.(scala|java)\b`)

// TestScenarios checks the scripts themselves: unique names, at least one
// answer each, and every Kafka override citing the Kafka source file its
// answer comes from.
func TestScenarios(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range scenarios() {
		if names[sc.Name] {
			t.Errorf("scenario %q defined twice", sc.Name)
		}
		names[sc.Name] = true
		answers := 0
		for i, s := range sc.Leaves() {
			if s.op == opDo || s.op == opAwait || s.op == opWait {
				answers++
			}
			if _, why, ok := s.Override(); ok && !kafkaSource.MatchString(why) {
				t.Errorf("%s step %d: the override names no Kafka source file: %q", sc.Name, i+1, why)
			}
		}
		if answers == 0 {
			t.Errorf("scenario %q records no answer", sc.Name)
		}
	}
}
