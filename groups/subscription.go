package groups

import "github.com/twmb/franz-go/pkg/kmsg"

// consumerProtocolType is the embedded protocol of Kafka consumers; only its
// member metadata has a known layout (the subscription).
const consumerProtocolType = "consumer"

// subscribedTopics returns the topics the members subscribe to, read from
// their consumer-protocol metadata for the chosen protocol (Kafka's
// computeSubscribedTopics); ok is false when unknown: another protocol type
// or metadata that does not parse. Called with g.mu held.
func (g *group) subscribedTopics() (topics map[string]bool, ok bool) {
	if g.protocolType != consumerProtocolType {
		return nil, false
	}
	topics = make(map[string]bool)
	if len(g.members) == 0 {
		return topics, true
	}
	if g.protocol == "" {
		return nil, false
	}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
