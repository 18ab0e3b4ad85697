package groups

import "github.com/kcoord/kcoord/fsm"

// topicsView is the topic registry at one version, as consumer groups
// resolve subscriptions against it. Immutable once made.
type topicsView struct {
	version uint64
	byName  map[string]registeredTopic
	names   map[topicID]string
}

var emptyTopicsView = newTopicsView(0, nil)

func newTopicsView(version uint64, topics []fsm.Topic) *topicsView {
	v := &topicsView{version: version, byName: make(map[string]registeredTopic, len(topics)), names: make(map[topicID]string, len(topics))}
	for _, t := range topics {
		v.byName[t.Name] = registeredTopic{id: t.ID, partitions: t.Partitions}
		v.names[t.ID] = t.Name
	}
	return v
}

// hashOf is the subscription metadata hash of members: over the
// registered topics any of them subscribes to.
func (v *topicsView) hashOf(members []targetMember) uint64 {
	var subscribed []string
	for i := range members {
		subscribed = append(subscribed, subscribedTopics(&members[i], v.byName)...)
	}
	return subscriptionMetadataHash(v.byName, subscribed)
}

// ownedTopicPartitions converts a heartbeat's owned partitions; nil stays
// nil (the member did not say).
func ownedTopicPartitions(owned []TopicIDPartitions) topicPartitions {
	if owned == nil {
		return nil
	}
	tp := topicPartitions{}
	for _, o := range owned {
		tp = tp.add(o.TopicID, o.Partitions)
	}
	return tp
}

// toTopicIDPartitions converts partitions for an answer, topics in id
// order.
func toTopicIDPartitions(tp topicPartitions) []TopicIDPartitions {
	out := make([]TopicIDPartitions, 0, len(tp))
	for _, p := range toConsumerPartitions(tp) {
		out = append(out, TopicIDPartitions{TopicID: p.TopicID, Partitions: p.Partitions})
	}
	return out
}
