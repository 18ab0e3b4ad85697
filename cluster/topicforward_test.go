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
	} {
		b, err := fsm.Encode(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if err := topicChange(b); (err == nil) != tc.want {
			t.Errorf("%T: topicChange = %v, want accepted %v", tc.cmd, err, tc.want)
		}
	}
	if topicChange(nil) == nil {
		t.Error("an empty command accepted")
	}
}
