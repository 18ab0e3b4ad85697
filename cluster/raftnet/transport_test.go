package raftnet

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A heartbeat raft's fast path is handling when the shard's transport
// closes holds the close until it is done (the node closes its log store
// after: the heartbeat could be storing a term), and one that arrives
// after is answered ErrRaftShutdown without reaching raft.
func TestClosingTheTransportWaitsForAHeartbeatInFlight(t *testing.T) {
	nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	tr := Transport{unpipelinedTransport: unpipelinedTransport{nt}, hub: &beatHub{}, beat: &beatMember{}, beatsIn: &handlerGate{}}
	entered, release := make(chan struct{}), make(chan struct{})
	calls := 0
	tr.SetHeartbeatHandler(func(rpc raft.RPC) {
		calls++
		close(entered)
		<-release
		rpc.Respond(&raft.AppendEntriesResponse{}, nil)
	})
	handle := *tr.beat.handler.Load()

	inFlight := make(chan raft.RPCResponse, 1)
	go handle(raft.RPC{Command: &raft.AppendEntriesRequest{}, RespChan: inFlight})
	<-entered
	closed := make(chan struct{})
	go func() { tr.beatsIn.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("the transport closed while a heartbeat was being handled")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if r := <-inFlight; r.Error != nil {
		t.Fatalf("the heartbeat in flight: %v", r.Error)
	}

	late := make(chan raft.RPCResponse, 1)
	handle(raft.RPC{Command: &raft.AppendEntriesRequest{}, RespChan: late})
	if r := <-late; !errors.Is(r.Error, raft.ErrRaftShutdown) {
		t.Fatalf("a heartbeat after the close: %v, want ErrRaftShutdown", r.Error)
	}
	if calls != 1 {
		t.Fatalf("raft handled %d heartbeats, want the one before the close", calls)
	}
}
