package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/server"
)

// BenchmarkOffsetFetch measures what linearizable reads cost: OffsetFetch
// round trips from kgo clients against a three-node in-process cluster
// whose coordinators confirm their leadership with a quorum before every
// answer (the read index, batched per shard), side by side with the same
// cluster serving reads from the leader's state unconfirmed (the previous
// behaviour, which a paused leader turns into stale reads) and with
// franz-go's in-memory kfake. "serial" is one client, one fetch at a time;
// "parallel64" is 64 clients, each fetching its own group. Compare
// fetches/s and p50-ms.
//
//	go test ./e2e -run '^$' -bench OffsetFetch -benchtime 3000x
func BenchmarkOffsetFetch(b *testing.B) {
	cluster := func(unconfirmed bool) []string {
		servers := server.StartTestCluster(b, 3, func(_ int, c *server.Config) {
			c.Groups = func(gc *groups.Config) { gc.UnconfirmedReads = unconfirmed }
		})
		addrs := make([]string, len(servers))
		for i, s := range servers {
			addrs[i] = s.KafkaAddr().String()
		}
		return addrs
	}
	b.Run("kcoord-3nodes-confirmed", func(b *testing.B) { benchOffsetFetch(b, cluster(false)...) })
	b.Run("kcoord-3nodes-unconfirmed", func(b *testing.B) { benchOffsetFetch(b, cluster(true)...) })
	b.Run("kfake", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		benchOffsetFetch(b, c.ListenAddrs()[0])
	})
}

func benchOffsetFetch(b *testing.B, addrs ...string) {
	const topic = "bench-fetches"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	topicID := createTopic(ctx, b, newAdmin(b, addrs[0]), topic, 1)
	clients := make([]*kgo.Client, benchClients)
	for i := range clients {
		clients[i] = newClient(b, addrs[0], kgo.SeedBrokers(addrs...))
	}
	group := func(i int) string { return fmt.Sprintf("bench-fetch-group-%d", i) }
	fetch := func(cl *kgo.Client, g string) error {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.TopicID, rt.Partitions = topic, topicID, []int32{0}
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
		req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Groups) != 1 {
			return fmt.Errorf("fetch of %s: %d groups answered", g, len(resp.Groups))
		}
		got := resp.Groups[0]
		if err := kerr.ErrorForCode(got.ErrorCode); err != nil {
			return err
		}
		if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 || got.Topics[0].Partitions[0].Offset != 1 {
			return fmt.Errorf("fetch of %s: %+v", g, got.Topics)
		}
		return nil
	}
	// Every group holds one commit, and every client has fetched once, so
	// coordinator lookups and connections are warm.
	var warm sync.WaitGroup
	errs := make([]error, len(clients))
	for i, cl := range clients {
		warm.Go(func() {
			adm := kmsg.NewPtrOffsetCommitRequest()
			adm.Group, adm.Generation = group(i), -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = topic, topicID
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 1, -1
			rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
			adm.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			resp, err := adm.RequestWith(ctx, cl)
			if err == nil {
				err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
			if err == nil {
				err = fetch(cl, group(i))
			}
			errs[i] = err
		})
	}
	warm.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("warm-up of %s: %v", group(i), err)
		}
	}

	benchRoundTrips(b, "fetches/s", func(i int) error { return fetch(clients[i], group(i)) })
}
