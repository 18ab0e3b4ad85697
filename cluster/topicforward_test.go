package cluster

import (
	"testing"

	"github.com/kcoord/kcoord/fsm"
)

// Only topic changes reach the metadata group through ApplyTopicChange and
// the admin stream: a peer cannot forward, say, a node drain that way.
func TestTopicChangeAcceptsOnlyTopicCommands(t *testing.T) {
	for _, tc := range []struct {
		cmd  fsm.Command
		want bool
	}{
		{&fsm.TopicCreate{Topic: fsm.Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}}, true},
		{&fsm.TopicDelete{Name: "t"}, true},
		{&fsm.NodeDrain{ID: 2}, false},
		{&fsm.TopicCreate{Topic: fsm.Topic{Name: "t", Partitions: 0}}, false},
		{&fsm.TopicDelete{}, false},
	} {
		b, err := fsm.Encode(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := topicChange(b); (err == nil) != tc.want {
			t.Errorf("%T: topicChange = %v, want accepted %v", tc.cmd, err, tc.want)
		}
	}
	create, _ := fsm.Encode(&fsm.TopicCreate{Topic: fsm.Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}})
	for name, cmd := range map[string][]byte{
		"empty":             nil,
		"a body cut short":  create[:len(create)-3],
		"a newer body":      append([]byte{create[0], create[1] + 1}, create[2:]...),
		"a type byte alone": {create[0]},
	} {
		// Applied, any of these would panic every metadata replica.
		if _, err := topicChange(cmd); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
