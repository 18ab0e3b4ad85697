package groups

import "github.com/twmb/franz-go/pkg/kmsg"

// clientProtocolType is the protocol type that Kafka's consumer clients
// embed in classic groups (ConsumerProtocol.PROTOCOL_TYPE); only its member
// metadata has a known layout (the subscription). In this package
// "consumer" otherwise names the KIP-848 group kind only.
const clientProtocolType = "consumer"

// subscribedTopics returns the topics the current generation's members
// subscribe to, computed when the generation started (as Kafka does in
// initNextGeneration); ok is false when unknown. Called with g.mu held.
func (g *classicGroup) subscribedTopics() (topics map[string]bool, ok bool) {
	return g.subscribed, g.subscribedKnown
}

// computeSubscribedTopics reads the members' subscriptions from their
// consumer-protocol metadata for the chosen protocol (Kafka's
// computeSubscribedTopics); ok is false for another protocol type or
// metadata that does not parse. Called with g.mu held when a generation
// starts or the group is loaded.
func (g *classicGroup) computeSubscribedTopics() (topics map[string]bool, ok bool) {
	if g.protocolType != clientProtocolType {
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
