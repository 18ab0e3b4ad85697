package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// TestApplyRefusesACommandOfTheOtherFSMsLog: a command that decodes but
// belongs to the other FSM (a topic command in a shard's log, a group or
// offset command in the metadata group's) is answered ErrForeignCommand and
// changes nothing; it used to panic, crashing every replica at every replay
// of the entry (found by FuzzApply's seeds).
func TestApplyRefusesACommandOfTheOtherFSMsLog(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fsm     raft.FSM
		foreign []Command
	}{
		{"shard", NewShardFSM(0, nil), []Command{
			&TopicCreate{Topic: Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}},
			&TopicDelete{Name: "t"},
		}},
		{"meta", NewMetaFSM(nil), []Command{
			&GroupPut{Group: sampleGroup("g")},
			&GroupDelete{GroupID: "g"},
			&OffsetCommit{GroupID: "g", Timestamp: 1, Offsets: []OffsetCommitPartition{{Topic: "t", Offset: Offset{Offset: 1}}}},
			&OffsetDelete{GroupID: "g", Partitions: []TopicPartition{{Topic: "t"}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp := apply(t, tc.fsm, 1, &ClusterStamp{ID: "c"}); resp != nil {
				t.Fatal(resp)
			}
			before := persist(t, tc.fsm)
			for i, cmd := range tc.foreign {
				var resp any
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("%s: Apply panicked: %v", cmd.CommandType(), p)
						}
					}()
					resp = apply(t, tc.fsm, uint64(i+2), cmd)
				}()
				if err, _ := resp.(error); !errors.Is(err, ErrForeignCommand) {
					t.Errorf("%s: Apply answered %v, want ErrForeignCommand", cmd.CommandType(), resp)
				}
			}
			if after := persist(t, tc.fsm); !bytes.Equal(after, before) {
				t.Error("a refused command changed the state")
			}
		})
	}
}
