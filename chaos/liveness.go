package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckLiveness waits, up to bound, until every consumer group is Stable
// with as many members as the workload runs in it and every partition of
// the topic assigned to exactly one of them, as DescribeGroups says. A
// group that does not get there within bound is an anomaly. Called after
// the last fault healed, healedAgo before the call; the result gives the
// time the slowest group took since that heal.
func CheckLiveness(ctx context.Context, w *Workload, bound, healedAgo time.Duration) CheckResult {
	res := CheckResult{Name: "liveness"}
	groups := w.ConsumerGroups()
	if len(groups) == 0 {
		res.Summary = "no consumer groups"
		return res
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	settled := map[string]time.Duration{}
	last := map[string]string{}
	for len(settled) < len(groups) {
		want := w.Members()
		// A fresh client each round: one that cached a coordinator found
		// while a node was dying keeps asking it.
		if cl, err := kgo.NewClient(kgo.SeedBrokers(w.cfg.Brokers...)); err == nil {
			adm := kadm.NewClient(cl)
			var classic, kip848 []string
			for gi, g := range groups {
				if w.kip848(gi) {
					kip848 = append(kip848, g)
				} else {
					classic = append(classic, g)
				}
			}
			// kadm describes every group when given none: ask only for
			// what there is.
			var described kadm.DescribedGroups
			var describedKIP848 kadm.DescribedConsumerGroups
			if len(classic) > 0 {
				described, err = adm.DescribeGroups(ctx, classic...)
			}
			var errKIP848 error
			if len(kip848) > 0 {
				describedKIP848, errKIP848 = adm.DescribeConsumerGroups(ctx, kip848...)
			}
			for gi, g := range groups {
				if _, ok := settled[g]; ok {
					continue
				}
				var why string
				switch {
				case w.kip848(gi) && errKIP848 != nil && describedKIP848 == nil:
					why = errKIP848.Error()
				case w.kip848(gi):
					why = stableConsumerProblem(describedKIP848[g], w.cfg.Topic, w.cfg.Partitions, want[g])
				case err != nil && described == nil:
					why = err.Error()
				default:
					why = stableProblem(described[g], w.cfg.Topic, w.cfg.Partitions, want[g])
				}
				if why == "" {
					settled[g] = time.Since(start)
				} else {
					last[g] = why
				}
			}
			cl.Close()
		}
		if len(settled) == len(groups) {
			break
		}
		select {
		case <-ctx.Done():
			for _, g := range groups {
				if _, ok := settled[g]; !ok {
					res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s not stable %v after the faults healed: %s", g, bound, last[g]))
				}
			}
			res.Summary = fmt.Sprintf("%d of %d groups stable within %v", len(settled), len(groups), bound)
			return res
		case <-time.After(250 * time.Millisecond):
		}
	}
	var worst time.Duration
	for _, d := range settled {
		worst = max(worst, d)
	}
	res.Checked = len(groups)
	res.Summary = fmt.Sprintf("%d groups stable, all partitions assigned, %v after the faults ended at worst (bound %v)",
		len(groups), (healedAgo + worst).Round(10*time.Millisecond), bound)
	return res
}

// stableConsumerProblem is stableProblem for a consumer-protocol group,
// as ConsumerGroupDescribe describes it: Stable at one epoch, with the
// members the workload runs and every partition assigned to one of them.
func stableConsumerProblem(g kadm.DescribedConsumerGroup, topic string, partitions int32, members int) string {
	switch {
	case g.Err != nil:
		return g.Err.Error()
	case g.State != "Stable":
		return "state " + g.State
	case len(g.Members) != members:
		return fmt.Sprintf("%d members, the workload runs %d", len(g.Members), members)
	}
	var owned []int32
	for _, m := range g.Members {
		for p := range m.Assignment[topic] {
			owned = append(owned, p)
		}
	}
	slices.Sort(owned)
	if int32(len(owned)) != partitions || len(slices.Compact(slices.Clone(owned))) != len(owned) {
		return fmt.Sprintf("partitions assigned %v of %d", owned, partitions)
	}
	return ""
}

// stableProblem says why a described group is not yet what the workload
// expects, or "" when it is.
func stableProblem(g kadm.DescribedGroup, topic string, partitions int32, members int) string {
	if err := g.Err; err != nil {
		return err.Error()
	}
	if g.State != "Stable" {
		return "state " + g.State
	}
	if len(g.Members) != members {
		return fmt.Sprintf("%d members, the workload runs %d", len(g.Members), members)
	}
	var owned []int32
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return "an assignment that is not a consumer's"
		}
		for _, t := range a.Topics {
			if t.Topic == topic {
				owned = append(owned, t.Partitions...)
			}
		}
	}
	slices.Sort(owned)
	if int32(len(owned)) != partitions || len(slices.Compact(slices.Clone(owned))) != len(owned) {
		return fmt.Sprintf("partitions assigned %v of %d", owned, partitions)
	}
	return ""
}
