package assignors

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// subscriptionVersion is the ConsumerMemberMetadata version members send:
// v1 added owned partitions (KIP-429), v2 their generation (KIP-792), v3 the
// rack (KIP-881).
const subscriptionVersion = 3

// EncodeSubscription encodes s as ConsumerMemberMetadata v3. Members call it
// to build their JoinGroup protocol metadata.
func EncodeSubscription(s Subscription) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = subscriptionVersion
	m.Topics = s.Topics
	m.UserData = s.UserData
	m.Generation = s.Generation
	if s.Rack != "" {
		m.Rack = kmsg.StringPtr(s.Rack)
	}
	m.OwnedPartitions = make([]kmsg.ConsumerMemberMetadataOwnedPartition, len(s.Owned))
	for i, tp := range s.Owned {
		m.OwnedPartitions[i] = kmsg.ConsumerMemberMetadataOwnedPartition{Topic: tp.Topic, Partitions: tp.Partitions}
	}
	return m.AppendTo(nil)
}

// DecodeSubscription decodes ConsumerMemberMetadata v0 to v3. The leader
// calls it on every member's JoinGroup protocol metadata. Fields a version
// lacks are left at their defaults (Generation -1, Rack "").
func DecodeSubscription(b []byte) (Subscription, error) {
	var m kmsg.ConsumerMemberMetadata
	if err := readMemberMetadata(&m, b, false); err != nil {
		return Subscription{}, err
	}
	s := Subscription{Topics: m.Topics, UserData: m.UserData, Generation: m.Generation}
	if m.Rack != nil {
		s.Rack = *m.Rack
	}
	if len(m.OwnedPartitions) > 0 {
		s.Owned = make([]TopicPartitions, len(m.OwnedPartitions))
		for i, o := range m.OwnedPartitions {
			s.Owned[i] = TopicPartitions{Topic: o.Topic, Partitions: o.Partitions}
		}
	}
	return s, nil
}

// readMemberMetadata decodes b into m. Some clients announce v1 but send no
// owned partitions; like Kafka's and franz-go's clients, we then read the
// bytes as v0. With unsafe, m's strings alias b.
func readMemberMetadata(m *kmsg.ConsumerMemberMetadata, b []byte, unsafe bool) error {
	read := m.ReadFrom
	if unsafe {
		read = m.UnsafeReadFrom
	}
	err := read(b)
	if err != nil && bytes.HasPrefix(b, []byte{0, 1}) {
		v0 := append([]byte{0, 0}, b[2:]...)
		err = read(v0)
	}
	if err != nil {
		return fmt.Errorf("%w: subscription: %v", ErrMalformedMetadata, err)
	}
	return nil
}

// EncodeAssignment encodes a as ConsumerMemberAssignment v0, which every
// consumer protocol version reads alike. The leader calls it for each
// member's SyncGroup assignment.
func EncodeAssignment(a Assignment) []byte {
	m := kmsg.NewConsumerMemberAssignment()
	m.UserData = a.UserData
	m.Topics = make([]kmsg.ConsumerMemberAssignmentTopic, len(a.Partitions))
	for i, tp := range a.Partitions {
		m.Topics[i] = kmsg.ConsumerMemberAssignmentTopic{Topic: tp.Topic, Partitions: tp.Partitions}
	}
	return m.AppendTo(nil)
}

// DecodeAssignment decodes a ConsumerMemberAssignment of any version. Every
// member calls it on its SyncGroup response. An empty b is an empty
// assignment, as Kafka sends to members it gives nothing.
func DecodeAssignment(b []byte) (Assignment, error) {
	if len(b) == 0 {
		return Assignment{}, nil
	}
	var m kmsg.ConsumerMemberAssignment
	if err := m.ReadFrom(b); err != nil {
		return Assignment{}, fmt.Errorf("%w: assignment: %v", ErrMalformedMetadata, err)
	}
	a := Assignment{UserData: m.UserData}
	if len(m.Topics) > 0 {
		a.Partitions = make([]TopicPartitions, len(m.Topics))
		for i, t := range m.Topics {
			a.Partitions[i] = TopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
		}
	}
	return a, nil
}

// encodeStickyUserData encodes what a sticky member owns as Kafka's
// StickyAssignorUserData v1 (kmsg.StickyMemberMetadata), which Java's
// StickyAssignor and franz-go's sticky balancers read.
func encodeStickyUserData(owned []TopicPartitions, generation int32) []byte {
	m := kmsg.NewStickyMemberMetadata()
	m.Generation = generation
	m.CurrentAssignment = make([]kmsg.StickyMemberMetadataCurrentAssignment, len(owned))
	for i, tp := range owned {
		m.CurrentAssignment[i] = kmsg.StickyMemberMetadataCurrentAssignment{Topic: tp.Topic, Partitions: tp.Partitions}
	}
	return m.AppendTo(nil) // a generation of -1 encodes as v0, which has none

}

// cooperativeGeneration reads the generation from a user data of Java's
// CooperativeStickyAssignor (an int32, for members older than KIP-792's
// ConsumerMemberMetadata v2).
func cooperativeGeneration(b []byte) (int32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	r := kbin.Reader{Src: b}
	g := r.Int32()
	return g, r.Complete() == nil
}
