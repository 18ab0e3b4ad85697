package conformance

import "time"

// retention is the configuration of the retention scenarios:
// offsets.retention.minutes of one second, checked every 100 ms.
var retention = Config{Retention: time.Second, RetentionCheck: 100 * time.Millisecond}

// Offset retention, KIP-211 (GroupMetadata.scala removeExpiredOffsets):
// an Empty group's offsets expire offsets.retention.minutes after it became
// Empty; a Stable consumer group's offsets of topics it does not subscribe
// to expire that long after their commit; a group without a protocol type
// (offsets only) expires offsets that long after their commit; nothing
// expires while a group rebalances. An Empty group left without offsets
// is removed. Expiry runs every offsets.retention.check.interval.ms.
var retentionScenarios = []Scenario{
	{
		Name:   "kip211_empty_group_offsets_expire_after_it_became_empty",
		Config: retention,
		Steps: []Step{
			stableA(),
			Do("A", Commit(8, "$A", 1, At("t1", 0, 1), At("t2", 0, 2))),
			Sleep(700 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 1)),
			Do("A", Leave(4, "$A")),
			// The commits are older than the retention, the Empty state
			// is not.
			Sleep(600 * time.Millisecond),
			Do("X", FetchAll(7)),
			Sleep(700 * time.Millisecond),
			Do("X", FetchAll(7)).Kafka(
				"X OffsetFetch v7: NONE",
				"the expired group is removed (GroupMetadataManager.scala cleanupGroupMetadata) and "+
					"OffsetFetch of an unknown group answers no error (GroupMetadataManager.scala getOffsets); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			Do("X", Describe(5, "g")),
			Do("X", List(4)),
		},
	},
	{
		Name:   "kip211_stable_group_keeps_offsets_of_subscribed_topics",
		Config: retention,
		Steps: []Step{
			stableA(),
			Do("A", Commit(8, "$A", 1, At("t1", 0, 1), At("t2", 0, 2))),
			Sleep(700 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 1)),
			Sleep(700 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 1)),
			Do("X", FetchAll(7)),
			Do("X", Describe(5, "g")),
		},
	},
	{
		Name:   "kip211_offsets_only_group_expires_offsets_after_their_commit",
		Config: retention,
		Steps: []Step{
			Do("X", Commit(8, "", -1, At("t1", 0, 1))),
			Sleep(600 * time.Millisecond),
			Do("X", Commit(8, "", -1, At("t1", 1, 2))),
			Sleep(700 * time.Millisecond),
			Do("X", FetchAll(7)),
			Do("X", Describe(5, "g")),
			Sleep(600 * time.Millisecond),
			Do("X", FetchAll(7)).Kafka(
				"X OffsetFetch v7: NONE",
				"an Empty group without offsets is removed (GroupMetadataManager.scala cleanupGroupMetadata) "+
					"and OffsetFetch of an unknown group answers no error (GroupMetadataManager.scala "+
					"getOffsets); kfake answers GROUP_ID_NOT_FOUND"),
			Do("X", Describe(5, "g")),
		},
	},
	{
		// An Empty group with a protocol type counts retention from when
		// it became Empty (its state timestamp), even for offsets
		// committed later. (The group keeps an offset of its own so that
		// it is not removed as soon as it is Empty.)
		Name:   "kip211_empty_group_retention_counts_from_the_empty_transition",
		Config: retention,
		Steps: []Step{
			stableA(),
			Do("A", Commit(8, "$A", 1, At("t2", 0, 1))),
			Do("A", Leave(4, "$A")),
			Sleep(500 * time.Millisecond),
			Do("X", Commit(8, "", -1, At("t1", 0, 7))),
			Sleep(800 * time.Millisecond),
			Do("X", FetchAll(7)).Kafka(
				"X OffsetFetch v7: NONE",
				"GroupMetadata.scala removeExpiredOffsets: case Some(_) if is(Empty) bases expiry on "+
					"currentStateTimestamp, not the commit timestamp; kfake uses the later of the two"),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=Dead proto=""/"" members=[]`,
				"the Empty group left without offsets was removed (GroupMetadataManager.scala cleanupGroupMetadata)"),
		},
	},
	{
		// Expired offsets stay readable until the next expiry run: Kafka
		// runs it at startup and then every check interval
		// (GroupMetadataManager.scala startup: scheduler.schedule(...,
		// 0L, offsetsRetentionCheckIntervalMs)), so with an interval of a
		// minute nothing expires within the scenario.
		Name:   "kip211_expiry_waits_for_the_retention_check",
		Config: Config{Retention: 200 * time.Millisecond, RetentionCheck: time.Minute},
		Steps: []Step{
			Do("X", Commit(8, "", -1, At("t1", 0, 1))),
			stableA(InGroup("s")),
			Do("A", Commit(8, "$A", 1, InGroup("s"), At("t2", 0, 2))),
			Do("A", Leave(4, "$A", InGroup("s"))),
			Sleep(600 * time.Millisecond),
			Do("X", FetchAll(7)),
			Do("X", FetchAll(7, InGroup("s"))),
			Do("X", List(4)),
		},
	},
	{
		Name:   "kip211_nothing_expires_while_the_group_rebalances",
		Config: retention,
		Steps: []Step{
			stableAB(),
			Do("A", Commit(8, "$A", 2, At("t2", 0, 5))),
			Send("B", Join(7, "$B", Protocols(P("range", "t1", "t3")))),
			Sleep(1300 * time.Millisecond),
			Do("X", FetchAll(7)),
			Do("A", Join(7, "$A")),
			Await("B"),
			Send("B", Sync(5, "$B", 3)),
			Do("A", Sync(5, "$A", 3, Assign("$A", "a3"), Assign("$B", "b3"))),
			Await("B"),
			Sleep(300 * time.Millisecond),
			Do("X", FetchAll(7)),
		},
	},
}
