package api_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/server"
	"github.com/kcoord/kcoord/transport"
)

// wire is one raw connection to a test server; requests go at the version
// set on them.
type wire struct {
	t    *testing.T
	c    *transport.RawClient
	addr string
}

func startWire(t *testing.T, mutate func(*server.Config)) *wire {
	t.Helper()
	cfg := server.TestConfig(t.TempDir())
	if mutate != nil {
		mutate(&cfg)
	}
	s := server.StartTestServer(t, cfg)
	return dialWire(t, s.KafkaAddr().String())
}

func dialWire(t *testing.T, addr string) *wire {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := transport.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetClientID("wire-test")
	t.Cleanup(func() { c.Close() })
	return &wire{t: t, c: c, addr: addr}
}

func do[T kmsg.Response](w *wire, req kmsg.Request, version int16) T {
	w.t.Helper()
	req.SetVersion(version)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := w.c.Do(ctx, req)
	if err != nil {
		w.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp.(T)
}

func code(t *testing.T, got int16, want *kerr.Error) {
	t.Helper()
	if want == nil && got != 0 || want != nil && got != want.Code {
		t.Fatalf("error code %v, want %v", kerr.ErrorForCode(got), want)
	}
}

func (w *wire) createTopic(name string, partitions int32) {
	w.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp := do[*kmsg.CreateTopicsResponse](w, req, 7)
	code(w.t, resp.Topics[0].ErrorCode, nil)
}

func TestFindCoordinatorVersions(t *testing.T) {
	w := startWire(t, nil)
	host, port := splitAddr(t, w.addr)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "group-" + strconv.Itoa(int(v))
		resp := do[*kmsg.FindCoordinatorResponse](w, req, v)
		code(t, resp.ErrorCode, nil)
		if resp.NodeID != 1 || resp.Host != host || resp.Port != port {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{"a", "b", "c"}
	resp := do[*kmsg.FindCoordinatorResponse](w, req, 4)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("batched: %+v", resp)
	}
	for i, c := range resp.Coordinators {
		if c.Key != req.CoordinatorKeys[i] || c.ErrorCode != 0 || c.NodeID != 1 || c.Port != port {
			t.Fatalf("batched key %d: %+v", i, c)
		}
	}
	req.CoordinatorType = 1 // transactions: not served
	resp = do[*kmsg.FindCoordinatorResponse](w, req, 4)
	code(t, resp.Coordinators[0].ErrorCode, kerr.CoordinatorNotAvailable)
}

func splitAddr(t *testing.T, addr string) (string, int32) {
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	return addr[:i], int32(p)
}

func joinRequest(group, member string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 1}
	req.Protocols = append(req.Protocols, p)
	return req
}

// TestJoinSyncCommitFetchAcrossVersions runs one member through a group at
// old and new versions of every API it uses.
func TestJoinSyncCommitFetchAcrossVersions(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("t", 3)
	for _, v := range []struct {
		name                              string
		join, sync, hb, commit, fetch, lv int16
	}{
		{"oldest", 0, 0, 0, 1, 1, 0},
		{"kafka-go", 2, 0, 0, 2, 1, 0},
		{"sarama", 7, 5, 4, 8, 8, 4},
		{"newest", 9, 5, 4, 9, 9, 5},
	} {
		t.Run(v.name, func(t *testing.T) {
			group := "g-" + v.name
			jr := joinRequest(group, "")
			join := do[*kmsg.JoinGroupResponse](w, jr, v.join)
			if v.join >= 4 {
				code(t, join.ErrorCode, kerr.MemberIDRequired)
				jr.MemberID = join.MemberID
				join = do[*kmsg.JoinGroupResponse](w, jr, v.join)
			}
			code(t, join.ErrorCode, nil)
			if join.Generation != 1 || join.LeaderID != join.MemberID || len(join.Members) != 1 || *join.Protocol != "range" {
				t.Fatalf("join: %+v", join)
			}
			if v.join >= 7 && (join.ProtocolType == nil || *join.ProtocolType != "consumer") {
				t.Fatalf("join v%d lacks the protocol type", v.join)
			}
			sr := kmsg.NewPtrSyncGroupRequest()
			sr.Group, sr.MemberID, sr.Generation = group, join.MemberID, join.Generation
			sr.ProtocolType, sr.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range") // mandatory from v5 (KIP-559)
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = join.MemberID, []byte("assigned")
			sr.GroupAssignment = append(sr.GroupAssignment, a)
			sync := do[*kmsg.SyncGroupResponse](w, sr, v.sync)
			code(t, sync.ErrorCode, nil)
			if string(sync.MemberAssignment) != "assigned" {
				t.Fatalf("sync: %+v", sync)
			}
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = group, join.MemberID, join.Generation
			code(t, do[*kmsg.HeartbeatResponse](w, hb, v.hb).ErrorCode, nil)

			cr := kmsg.NewPtrOffsetCommitRequest()
			cr.Group, cr.MemberID, cr.Generation = group, join.MemberID, join.Generation
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = "t"
			for p := int32(0); p < 3; p++ {
				cp := kmsg.NewOffsetCommitRequestTopicPartition()
				meta := "m" + strconv.Itoa(int(p))
				cp.Partition, cp.Offset, cp.Metadata, cp.LeaderEpoch = p, 100+int64(p), &meta, 7
				ct.Partitions = append(ct.Partitions, cp)
			}
			cr.Topics = append(cr.Topics, ct)
			commit := do[*kmsg.OffsetCommitResponse](w, cr, v.commit)
			for _, p := range commit.Topics[0].Partitions {
				code(t, p.ErrorCode, nil)
			}
			got := fetchOffsets(t, w, group, "t", []int32{0, 1, 2, 3}, v.fetch)
			for p := int32(0); p < 3; p++ {
				if got[p].Offset != 100+int64(p) || *got[p].Metadata != "m"+strconv.Itoa(int(p)) {
					t.Fatalf("partition %d: %+v", p, got[p])
				}
				wantEpoch := int32(-1)
				if v.commit >= 6 && v.fetch >= 5 {
					wantEpoch = 7
				}
				if v.fetch >= 5 && got[p].LeaderEpoch != wantEpoch {
					t.Fatalf("partition %d epoch %d, want %d", p, got[p].LeaderEpoch, wantEpoch)
				}
			}
			if got[3].Offset != -1 {
				t.Fatalf("uncommitted partition: %+v", got[3])
			}
			lr := kmsg.NewPtrLeaveGroupRequest()
			lr.Group, lr.MemberID = group, join.MemberID
			if v.lv >= 3 {
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = join.MemberID
				lr.Members = append(lr.Members, m)
			}
			leave := do[*kmsg.LeaveGroupResponse](w, lr, v.lv)
			code(t, leave.ErrorCode, nil)
			if v.lv >= 3 {
				code(t, leave.Members[0].ErrorCode, nil)
			}
		})
	}
}

// fetchOffsets reads partitions of one topic at any OffsetFetch version.
func fetchOffsets(t *testing.T, w *wire, group, topic string, partitions []int32, version int16) map[int32]kmsg.OffsetFetchResponseGroupTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	out := map[int32]kmsg.OffsetFetchResponseGroupTopicPartition{}
	if version >= 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = topic, partitions
		g.Topics = append(g.Topics, gt)
		req.Groups = append(req.Groups, g)
		resp := do[*kmsg.OffsetFetchResponse](w, req, version)
		code(t, resp.Groups[0].ErrorCode, nil)
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			out[p.Partition] = p
		}
		return out
	}
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp := do[*kmsg.OffsetFetchResponse](w, req, version)
	code(t, resp.ErrorCode, nil)
	for _, p := range resp.Topics[0].Partitions {
		code(t, p.ErrorCode, nil)
		out[p.Partition] = kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata}
	}
	return out
}

func TestOffsetCommitValidation(t *testing.T) {
	w := startWire(t, func(c *server.Config) { c.OffsetMetadataMaxBytes = 8 })
	w.createTopic("t", 2)
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.Generation = "admin", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	long, short := "this is too long", "ok"
	for p, meta := range []*string{&long, &short} {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.Metadata = int32(p), 5, meta
		ct.Partitions = append(ct.Partitions, cp)
	}
	cr.Topics = append(cr.Topics, ct)
	resp := do[*kmsg.OffsetCommitResponse](w, cr, 8)
	code(t, resp.Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)
	code(t, resp.Topics[0].Partitions[1].ErrorCode, nil)
	got := fetchOffsets(t, w, "admin", "t", []int32{0, 1}, 8)
	if got[0].Offset != -1 || got[1].Offset != 5 {
		t.Fatalf("only the valid partition is stored: %+v", got)
	}
	// A member commit to a group that does not exist.
	cr.Group, cr.Generation, cr.MemberID = "nogroup", 4, "m"
	resp = do[*kmsg.OffsetCommitResponse](w, cr, 8)
	code(t, resp.Topics[0].Partitions[1].ErrorCode, kerr.IllegalGeneration)
	cr.Group = "" // a group like any other for OffsetCommit (Kafka 4.x), and there is none yet
	resp = do[*kmsg.OffsetCommitResponse](w, cr, 8)
	code(t, resp.Topics[0].Partitions[1].ErrorCode, kerr.IllegalGeneration)
}

func TestOffsetFetchAllAndManyGroups(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("x", 3)
	w.createTopic("y", 3)
	for _, g := range []string{"a", "b"} {
		cr := kmsg.NewPtrOffsetCommitRequest()
		cr.Group, cr.Generation = g, -1
		for _, topic := range []string{"x", "y"} {
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = topic
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = 2, 42
			ct.Partitions = append(ct.Partitions, cp)
			cr.Topics = append(cr.Topics, ct)
		}
		do[*kmsg.OffsetCommitResponse](w, cr, 9)
	}
	// v2+: null topics mean everything committed.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "a"
	resp := do[*kmsg.OffsetFetchResponse](w, req, 7)
	if len(resp.Topics) != 2 || resp.Topics[0].Topic != "x" || resp.Topics[1].Partitions[0].Offset != 42 {
		t.Fatalf("all offsets: %+v", resp.Topics)
	}
	// v8: many groups, one of them unknown.
	req = kmsg.NewPtrOffsetFetchRequest()
	for _, g := range []string{"a", "b", "unknown"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		req.Groups = append(req.Groups, rg)
	}
	resp = do[*kmsg.OffsetFetchResponse](w, req, 8)
	if len(resp.Groups) != 3 || len(resp.Groups[0].Topics) != 2 || len(resp.Groups[1].Topics) != 2 || len(resp.Groups[2].Topics) != 0 {
		t.Fatalf("many groups: %+v", resp.Groups)
	}
}

func TestTopicsRegistry(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("orders", 12)

	req := kmsg.NewPtrCreateTopicsRequest()
	for _, spec := range []struct {
		name string
		p    int32
		rf   int16
	}{{"orders", 3, 1}, {"bad/name", 1, 1}, {"zero", 0, 1}, {"rf", 1, 3}, {"dup", 1, 1}, {"dup", 1, 1}, {"defaults", -1, -1}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = spec.name, spec.p, spec.rf
		req.Topics = append(req.Topics, rt)
	}
	resp := do[*kmsg.CreateTopicsResponse](w, req, 7)
	for i, want := range []*kerr.Error{kerr.TopicAlreadyExists, kerr.InvalidTopicException, kerr.InvalidPartitions, kerr.InvalidReplicationFactor, kerr.InvalidRequest, kerr.InvalidRequest, nil} {
		code(t, resp.Topics[i].ErrorCode, want)
	}
	if d := resp.Topics[6]; d.NumPartitions != 1 || d.ReplicationFactor != 1 || d.TopicID == [16]byte{} {
		t.Fatalf("defaults: %+v", d)
	}

	md := kmsg.NewPtrMetadataRequest()
	all := do[*kmsg.MetadataResponse](w, md, 13)
	if len(all.Topics) != 2 || len(all.Brokers) != 1 || all.ControllerID != 1 {
		t.Fatalf("metadata: %+v", all)
	}
	orders := all.Topics[1]
	if *orders.Topic != "orders" || len(orders.Partitions) != 12 || orders.Partitions[5].Leader != 1 {
		t.Fatalf("orders: %+v", orders)
	}
	v0 := do[*kmsg.MetadataResponse](w, kmsg.NewPtrMetadataRequest(), 0)
	if len(v0.Topics) != 2 {
		t.Fatalf("v0 empty list means all topics: %+v", v0.Topics)
	}
	mt := kmsg.NewMetadataRequestTopic()
	missing := "missing"
	mt.Topic = &missing
	md.Topics = append(md.Topics, mt)
	code(t, do[*kmsg.MetadataResponse](w, md, 12).Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"defaults", "missing"}
	dr := do[*kmsg.DeleteTopicsResponse](w, del, 5)
	code(t, dr.Topics[0].ErrorCode, nil)
	code(t, dr.Topics[1].ErrorCode, kerr.UnknownTopicOrPartition)
	del = kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = orders.TopicID
	del.Topics = append(del.Topics, dt)
	dr = do[*kmsg.DeleteTopicsResponse](w, del, 6)
	code(t, dr.Topics[0].ErrorCode, nil)
	if len(do[*kmsg.MetadataResponse](w, kmsg.NewPtrMetadataRequest(), 12).Topics) != 0 {
		t.Fatal("topics left after delete")
	}
}

func TestListOffsetsAndFetchAreEmpty(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("t", 2)
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	for _, ts := range []int64{-2, -1} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 1, ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition = 9
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	resp := do[*kmsg.ListOffsetsResponse](w, lo, 7)
	for i, p := range resp.Topics[0].Partitions[:2] {
		if p.ErrorCode != 0 || p.Offset != 0 {
			t.Fatalf("partition answer %d: %+v", i, p)
		}
	}
	code(t, resp.Topics[0].Partitions[2].ErrorCode, kerr.UnknownTopicOrPartition)
	v0 := do[*kmsg.ListOffsetsResponse](w, lo, 0)
	if got := v0.Topics[0].Partitions[0].OldStyleOffsets; len(got) != 1 || got[0] != 0 {
		t.Fatalf("v0 offsets: %v", got)
	}

	f := kmsg.NewPtrFetchRequest()
	f.MaxWaitMillis, f.ReplicaID = 200, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset = 0, 0
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	start := time.Now()
	fr := do[*kmsg.FetchResponse](w, f, 12)
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("fetch answered before MaxWaitMillis")
	}
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch: %+v", p)
	}
	// Every version answers an empty record set, not a null one: librdkafka
	// (which falls back to Fetch v0 when ApiVersions fails) cannot parse a
	// null one. kmsg decodes a null set as nil and an empty one as empty.
	f.MaxWaitMillis = 0
	for _, v := range []int16{0, 4, 12} {
		if p := do[*kmsg.FetchResponse](w, f, v).Topics[0].Partitions[0]; p.RecordBatches == nil {
			t.Fatalf("Fetch v%d answered a null record set", v)
		}
	}
}

func TestGroupAdminAPIs(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("t", 1)
	jr := joinRequest("live", "")
	join := do[*kmsg.JoinGroupResponse](w, jr, 3)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "live", join.MemberID, join.Generation
	do[*kmsg.SyncGroupResponse](w, sr, 3)
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.Generation = "idle", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	ct.Partitions = append(ct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	cr.Topics = append(cr.Topics, ct)
	do[*kmsg.OffsetCommitResponse](w, cr, 8)

	lg := kmsg.NewPtrListGroupsRequest()
	list := do[*kmsg.ListGroupsResponse](w, lg, 5)
	if len(list.Groups) != 2 {
		t.Fatalf("list: %+v", list.Groups)
	}
	lg.StatesFilter = []string{"stable"}
	list = do[*kmsg.ListGroupsResponse](w, lg, 4)
	if len(list.Groups) != 1 || list.Groups[0].Group != "live" || list.Groups[0].GroupState != "Stable" {
		t.Fatalf("filtered list: %+v", list.Groups)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"live", "idle", "never"}
	desc := do[*kmsg.DescribeGroupsResponse](w, dg, 5)
	if g := desc.Groups[0]; g.State != "Stable" || g.Protocol != "range" || len(g.Members) != 1 || g.Members[0].ClientID != "wire-test" {
		t.Fatalf("describe live: %+v", g)
	}
	if desc.Groups[1].State != "Empty" || desc.Groups[2].State != "Dead" || desc.Groups[2].ErrorCode != 0 {
		t.Fatalf("describe idle/never: %+v", desc.Groups[1:])
	}
	// From v6 an unknown group is GROUP_ID_NOT_FOUND (KIP-1043).
	desc = do[*kmsg.DescribeGroupsResponse](w, dg, 6)
	code(t, desc.Groups[0].ErrorCode, nil)
	code(t, desc.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	if desc.Groups[2].State != "Dead" || desc.Groups[2].ErrorMessage == nil {
		t.Fatalf("v6 unknown group: %+v", desc.Groups[2])
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"live", "idle", "never"}
	dr := do[*kmsg.DeleteGroupsResponse](w, del, 2)
	code(t, dr.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	code(t, dr.Groups[1].ErrorCode, nil)
	code(t, dr.Groups[2].ErrorCode, kerr.GroupIDNotFound)
}

func commitAdmin(t *testing.T, w *wire, group, topic string, partitions ...int32) {
	t.Helper()
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.Generation = group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	for _, p := range partitions {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = p, 10
		ct.Partitions = append(ct.Partitions, cp)
	}
	cr.Topics = append(cr.Topics, ct)
	for _, p := range do[*kmsg.OffsetCommitResponse](w, cr, 8).Topics[0].Partitions {
		code(t, p.ErrorCode, nil)
	}
}

func TestOffsetDelete(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("t", 2)
	commitAdmin(t, w, "g", "t", 0, 1)
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetDeleteRequestTopicPartition()
	rp.Partition = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := do[*kmsg.OffsetDeleteResponse](w, req, 0)
	code(t, resp.ErrorCode, nil)
	code(t, resp.Topics[0].Partitions[0].ErrorCode, nil)
	got := fetchOffsets(t, w, "g", "t", []int32{0, 1}, 8)
	if got[0].Offset != 10 || got[1].Offset != -1 {
		t.Fatalf("after delete: %+v", got)
	}
	req.Group = "missing"
	code(t, do[*kmsg.OffsetDeleteResponse](w, req, 0).ErrorCode, kerr.GroupIDNotFound)
}

func TestOffsetsExpireAfterRetention(t *testing.T) {
	w := startWire(t, func(c *server.Config) {
		c.OffsetsRetention = 300 * time.Millisecond
		c.OffsetsRetentionCheckInterval = 50 * time.Millisecond
	})
	w.createTopic("t", 1)
	commitAdmin(t, w, "short-lived", "t", 0)
	if got := fetchOffsets(t, w, "short-lived", "t", []int32{0}, 8); got[0].Offset != 10 {
		t.Fatalf("just committed: %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fetchOffsets(t, w, "short-lived", "t", []int32{0}, 8)[0].Offset != -1 {
		if time.Now().After(deadline) {
			t.Fatal("offset never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"short-lived"}
	if st := do[*kmsg.DescribeGroupsResponse](w, dg, 5).Groups[0].State; st != "Dead" {
		t.Fatalf("a group with no offsets left is removed; state %s", st)
	}
}

// TestCreateTopicsOfMaxInt32PartitionsIsRefusedAndMetadataStillAnswers: a
// topic of 2^31-1 partitions used to be registered, and every Metadata
// request after it built two billion partitions and never answered.
func TestCreateTopicsOfMaxInt32PartitionsIsRefusedAndMetadataStillAnswers(t *testing.T) {
	w := startWire(t, nil)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge", math.MaxInt32, 1
	req.Topics = append(req.Topics, rt)
	resp := do[*kmsg.CreateTopicsResponse](w, req, 7)
	// Stop here if it was accepted: a Metadata request would then try to
	// describe every partition.
	code(t, resp.Topics[0].ErrorCode, kerr.InvalidPartitions)
	if msg := resp.Topics[0].ErrorMessage; msg == nil || !strings.Contains(*msg, "kcoord.max.partitions.per.topic") {
		t.Fatalf("the message does not name the limit: %v", msg)
	}

	// A liveness bound, not a timing: Metadata answers.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	r, err := w.c.Do(ctx, md)
	if err != nil {
		t.Fatalf("Metadata after the refused create: %v", err)
	}
	if topics := r.(*kmsg.MetadataResponse).Topics; len(topics) != 0 {
		t.Fatalf("topics registered: %+v", topics)
	}
}

// TestOffsetFetchAnswersARepeatedGroupOnce: a v8 request naming one group
// many times gets one answer for it, at its first place, with the
// partitions of all its entries.
func TestOffsetFetchAnswersARepeatedGroupOnce(t *testing.T) {
	w := startWire(t, nil)
	w.createTopic("t", 3)
	commitAdmin(t, w, "g", "t", 0, 1, 2)
	req := kmsg.NewPtrOffsetFetchRequest()
	for _, spec := range []struct {
		group      string
		partitions []int32
	}{{"g", []int32{0}}, {"other", nil}, {"g", []int32{1}}, {"g", []int32{1}}} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = spec.group
		if spec.partitions != nil {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = "t", spec.partitions
			rg.Topics = append(rg.Topics, gt)
		}
		req.Groups = append(req.Groups, rg)
	}
	resp := do[*kmsg.OffsetFetchResponse](w, req, 8)
	if len(resp.Groups) != 2 || resp.Groups[0].Group != "g" || resp.Groups[1].Group != "other" {
		t.Fatalf("groups answered: %+v", resp.Groups)
	}
	var got []int32
	for _, rt := range resp.Groups[0].Topics {
		for _, rp := range rt.Partitions {
			if rp.Offset != 10 {
				t.Errorf("t/%d offset %d, want 10", rp.Partition, rp.Offset)
			}
			got = append(got, rp.Partition)
		}
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("partitions of g: %v, want [0 1 1] (the entries' partitions)", got)
	}

	// Null topics (every committed offset) in any entry: all, once.
	req.Groups[1].Group = "g"
	resp = do[*kmsg.OffsetFetchResponse](w, req, 8)
	if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 3 {
		t.Fatalf("a repeated group with an entry asking for all: %+v", resp.Groups)
	}
}

// TestDescribeGroupsDescribesARepeatedGroupOnce: one answer per distinct
// group id, in the order of first appearance.
func TestDescribeGroupsDescribesARepeatedGroupOnce(t *testing.T) {
	w := startWire(t, nil)
	jr := joinRequest("live", "")
	join := do[*kmsg.JoinGroupResponse](w, jr, 3)
	code(t, join.ErrorCode, nil)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"live", "never", "live", "live", "never"}
	desc := do[*kmsg.DescribeGroupsResponse](w, dg, 5)
	if len(desc.Groups) != 2 || desc.Groups[0].Group != "live" || desc.Groups[1].Group != "never" {
		t.Fatalf("groups described: %+v", desc.Groups)
	}
	if len(desc.Groups[0].Members) != 1 {
		t.Fatalf("live: %+v", desc.Groups[0])
	}
}
