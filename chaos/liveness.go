package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CheckLiveness waits, up to bound, until every consumer group is Stable
// with as many members as the workload runs in it and every partition of
// the topic assigned to exactly one of them, as DescribeGroups (classic
// groups) and ConsumerGroupDescribe (KIP-848 groups) say. A group that
// does not get there within bound is an anomaly, with what the KIP-848
// probe found about its server assignor when that explains it. Called
// from the run's goroutine after the last fault healed, healedAgo before
// the call; the result gives the time the slowest group took since that
// heal, and notes the KIP-848 groups the workload skipped and any
// assignment the server described by topic id alone.
func CheckLiveness(ctx context.Context, w *Workload, bound, healedAgo time.Duration) CheckResult {
	res := CheckResult{Name: "liveness"}
	skipped := ""
	if w.skippedKIP848 > 0 {
		skipped = fmt.Sprintf("; %d KIP-848 groups skipped", w.skippedKIP848)
		res.Notes = append(res.Notes, fmt.Sprintf("skipped the %d KIP-848 groups: %s; franz-go would have run them as classic groups",
			w.skippedKIP848, w.probe.Absent))
	}
	groups := w.ConsumerGroups()
	if len(groups) == 0 {
		res.Summary = "no consumer groups" + skipped
		return res
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	settled := map[string]time.Duration{}
	last := map[string]string{}
	topic := topicRef{name: w.cfg.Topic}
	var idOnly []string // KIP-848 groups whose assignment named the topic by id alone
	for len(settled) < len(groups) {
		// A fresh client each round: one that cached a coordinator found
		// while a node was dying keeps asking it.
		if cl, err := kgo.NewClient(kgo.SeedBrokers(w.cfg.Brokers...)); err == nil {
			if topic.id == ([16]byte{}) {
				topic.id = lookupTopicID(ctx, cl, topic.name)
			}
			for g, p := range describeGroups(ctx, w, cl, topic) {
				if _, ok := settled[g]; ok {
					continue
				}
				if p.byIDOnly && !slices.Contains(idOnly, g) {
					idOnly = append(idOnly, g)
				}
				if p.why == "" {
					settled[g] = time.Since(start)
				} else {
					last[g] = p.why
				}
			}
			cl.Close()
		}
		if len(settled) == len(groups) {
			break
		}
		select {
		case <-ctx.Done():
			assigns := w.hist.Snapshot().Assigns
			for gi, g := range groups {
				if _, ok := settled[g]; !ok {
					res.Anomalies = append(res.Anomalies, notStable(w, gi, bound, last[g], assigns))
				}
			}
			res.Summary = fmt.Sprintf("%d of %d groups stable within %v%s", len(settled), len(groups), bound, skipped)
			res.Notes = append(res.Notes, idOnlyNote(idOnly, topic)...)
			return res
		case <-time.After(250 * time.Millisecond):
		}
	}
	var worst time.Duration
	for _, d := range settled {
		worst = max(worst, d)
	}
	res.Checked = len(groups)
	res.Summary = fmt.Sprintf("%d groups stable, all partitions assigned, %v after the faults ended at worst (bound %v)%s",
		len(groups), (healedAgo + worst).Round(10*time.Millisecond), bound, skipped)
	res.Notes = append(res.Notes, idOnlyNote(idOnly, topic)...)
	return res
}

// notStable is the anomaly of the group at index gi of ConsumerGroups,
// which was not what the workload expects within bound (problem says
// why). For a KIP-848 group, it adds whether its members were ever
// assigned a partition (assigns is every assignment recorded) and what
// the probe before the run found about its server assignor.
func notStable(w *Workload, gi int, bound time.Duration, problem string, assigns []AssignRecord) string {
	g := w.ConsumerGroups()[gi]
	why := fmt.Sprintf("%s not stable %v after the faults healed: %s", g, bound, problem)
	if w.kip848(gi) && !slices.ContainsFunc(assigns, func(a AssignRecord) bool { return a.Group == g }) {
		why += "; its KIP-848 members were never assigned a partition"
	}
	if cause := w.kip848Cause(gi); cause != "" {
		why += "; " + cause
	}
	return why
}

// idOnlyNote says which groups' assignments ConsumerGroupDescribe gave
// by topic id with an empty topic name, a departure from Kafka (which
// names each topic it describes) that liveness saw through.
func idOnlyNote(groups []string, topic topicRef) []string {
	if len(groups) == 0 {
		return nil
	}
	slices.Sort(groups)
	return []string{fmt.Sprintf("ConsumerGroupDescribe gave the assignments of %s by topic id with an empty topic name "+
		"(Kafka names every topic it describes): liveness matched %s by its id %s",
		strings.Join(groups, ", "), topic.name, topicIDString(topic.id))}
}

// groupProblem is what one round of describing found of a group: why it
// is not yet what the workload expects ("" when it is), and whether its
// assignment named the topic by id alone.
type groupProblem struct {
	why      string
	byIDOnly bool
}

// describeGroups describes every consumer group of w once, the classic
// ones with DescribeGroups and the KIP-848 ones with
// ConsumerGroupDescribe, and says what each lacks.
func describeGroups(ctx context.Context, w *Workload, cl *kgo.Client, topic topicRef) map[string]groupProblem {
	want := w.Members()
	var classic, kip848 []string
	for gi, g := range w.ConsumerGroups() {
		if w.kip848(gi) {
			kip848 = append(kip848, g)
		} else {
			classic = append(classic, g)
		}
	}
	out := map[string]groupProblem{}
	// kadm describes every group when given none: ask only for what
	// there is.
	if len(classic) > 0 {
		described, err := kadm.NewClient(cl).DescribeGroups(ctx, classic...)
		for _, g := range classic {
			if err != nil && described == nil {
				out[g] = groupProblem{why: err.Error()}
			} else {
				out[g] = groupProblem{why: stableProblem(described[g], topic.name, w.cfg.Partitions, want[g])}
			}
		}
	}
	if len(kip848) > 0 {
		described, err := describeConsumerGroups(ctx, cl, kip848)
		for _, g := range kip848 {
			d, ok := described[g]
			switch {
			case !ok && err != nil:
				out[g] = groupProblem{why: err.Error()}
			case !ok:
				out[g] = groupProblem{why: "ConsumerGroupDescribe did not answer for it"}
			default:
				why, byIDOnly := stableConsumerProblem(d, topic, w.cfg.Partitions, want[g])
				out[g] = groupProblem{why, byIDOnly}
			}
		}
	}
	return out
}

// describeConsumerGroups sends ConsumerGroupDescribe to the groups'
// coordinators. kadm's DescribeConsumerGroups keys assignments by topic
// name alone, which a server that answers only topic ids leaves empty.
func describeConsumerGroups(ctx context.Context, cl *kgo.Client, groups []string) (map[string]kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = groups
	out := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
	var errs []error
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			errs = append(errs, shard.Err)
			continue
		}
		for _, g := range shard.Resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			out[g.Group] = g
		}
	}
	return out, errors.Join(errs...)
}

// topicRef is the workload's topic as a KIP-848 assignment may name it:
// by name, by id, or both (Kafka gives both). A zero id is unknown.
type topicRef struct {
	name string
	id   [16]byte
}

// matches says whether an assigned topic is this one, and whether only
// its id said so (the name was empty).
func (t topicRef) matches(tp kmsg.AssignmentTopicPartition) (match, byIDOnly bool) {
	switch {
	case tp.Topic != "":
		return tp.Topic == t.name, false
	case t.id != [16]byte{} && tp.TopicID == t.id:
		return true, true
	}
	return false, false
}

// lookupTopicID is the topic's id, from Metadata; zero when the server
// gives none or cannot be asked now.
func lookupTopicID(ctx context.Context, cl *kgo.Client, topic string) [16]byte {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || topics[topic].Err != nil {
		return [16]byte{}
	}
	return topics[topic].ID
}

// stableConsumerProblem is stableProblem for a consumer-protocol group,
// as ConsumerGroupDescribe describes it: Stable at one epoch, with the
// members the workload runs and every partition assigned to one of them.
// byIDOnly says the assignment named the topic by its id alone.
func stableConsumerProblem(g kmsg.ConsumerGroupDescribeResponseGroup, topic topicRef, partitions int32, members int) (why string, byIDOnly bool) {
	switch {
	case g.ErrorCode != 0:
		why = kerr.ErrorForCode(g.ErrorCode).Error()
		if g.ErrorMessage != nil && *g.ErrorMessage != "" {
			why += fmt.Sprintf(" (%q)", *g.ErrorMessage)
		}
		return why, false
	case g.State != "Stable":
		return "state " + g.State, false
	case len(g.Members) != members:
		return fmt.Sprintf("%d members, the workload runs %d", len(g.Members), members), false
	}
	var owned []int32
	var others []string // other topics the members were assigned
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			match, idOnly := topic.matches(tp)
			switch {
			case match:
				owned = append(owned, tp.Partitions...)
				byIDOnly = byIDOnly || idOnly
			case tp.Topic != "":
				others = append(others, tp.Topic)
			default:
				others = append(others, "an unnamed topic of id "+topicIDString(tp.TopicID))
			}
		}
	}
	slices.Sort(owned)
	switch {
	case len(owned) == 0:
		why = fmt.Sprintf("none of the %d partitions of %s assigned to its %d members", partitions, topic.name, len(g.Members))
		if slices.Sort(others); len(others) > 0 {
			why += "; their assignment names " + strings.Join(slices.Compact(others), ", ")
			if topic.id == [16]byte{} {
				why += fmt.Sprintf(" (Metadata gave %s no topic id to match)", topic.name)
			}
		}
	case int32(len(owned)) != partitions || len(slices.Compact(slices.Clone(owned))) != len(owned):
		why = fmt.Sprintf("partitions assigned %v of %d", owned, partitions)
	}
	return why, byIDOnly
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
