// Package api holds the Kafka API handlers: one file per API key, each
// opening with the versions it serves, turning a kmsg request into calls on
// the group coordinator (groups.Coordinator) or the metadata stores (topic
// registry, credentials, ACLs, features), and their results into a kmsg
// response. Handlers pass wire data only: what a request means for a group
// or its offsets is decided in package groups. Kafka error codes exist only
// here, at the wire edge (errors.go).
//
// Files, by role:
//
//   - alteruserscramcredentials.go: AlterUserScramCredentials (key 51).
//   - api.go: Handlers, its Config and the interfaces it is wired with
//     (Cluster and its Broker, Topics, Credentials, ACLStore, Shard), and
//     Register.
//   - authorize.go: authorization of each request by its principal.
//   - consumergroupdescribe.go: ConsumerGroupDescribe (key 69).
//   - consumergroupheartbeat.go: ConsumerGroupHeartbeat (key 68).
//   - createacls.go: CreateAcls (key 30).
//   - createtopics.go: CreateTopics (key 19).
//   - deleteacls.go: DeleteAcls (key 31).
//   - deletegroups.go: DeleteGroups (key 42).
//   - deletetopics.go: DeleteTopics (key 20).
//   - describeacls.go: DescribeAcls (key 29).
//   - describegroups.go: DescribeGroups (key 15).
//   - describeuserscramcredentials.go: DescribeUserScramCredentials (key 50).
//   - doc.go: this overview.
//   - errors.go: the stores' sentinel errors, and the one place kcoord
//     errors become Kafka error codes.
//   - fetch.go: Fetch (key 1).
//   - findcoordinator.go: FindCoordinator (key 10).
//   - heartbeat.go: Heartbeat (key 12).
//   - joingroup.go: JoinGroup (key 11).
//   - leavegroup.go: LeaveGroup (key 13).
//   - listgroups.go: ListGroups (key 16).
//   - listoffsets.go: ListOffsets (key 2).
//   - metadata.go: Metadata (key 3).
//   - metareplica.go: MetadataReplica, how a handler consults the metadata
//     group's leader before it answers a miss.
//   - offsetcommit.go: OffsetCommit (key 8).
//   - offsetdelete.go: OffsetDelete (key 47).
//   - offsetfetch.go: OffsetFetch (key 9).
//   - syncgroup.go: SyncGroup (key 14).
//   - updatefeatures.go: UpdateFeatures (key 57).
//   - versions.go: Versions, the ApiVersions table a node serves, for
//     `kcoord version`.
package api
