// Package server is one kcoord node, wired together: the Kafka listener
// (package transport) serving the handlers of package api, the node's
// shards and metadata group on Raft (package cluster), a group coordinator
// per shard (package groups) over the shard's replicated state (package
// fsm), and the node's HTTP endpoints. `kcoord serve` runs one Server; tests
// and `kcoord bench report` run several in one process (harness.go).
//
// # Life of a node
//
// New validates a Config and starts nothing. Start binds the Kafka
// listener, which refuses connections with a reset until the handlers are
// registered, opens the Raft node (cluster.Open), builds a coordinator on
// each of its shards, starts the node (Node.Start), opens the listener and
// starts the offsets retention loop (groups.RunRetention); it returns once
// requests are served, and Ready (or WaitReady) says when the shards have
// leaders. Shutdown hands leadership
// away and stops everything, Kill stops as a crash would; both are
// idempotent and safe at any time.
//
// # Files
//
// The node:
//
//   - server.go: Server, New, Start, Ready, Shutdown and Kill, and the
//     leadership callback that activates and deactivates each shard's
//     coordinator.
//   - config.go: Config, everything `kcoord serve` needs, its defaults
//     and Validate.
//   - kafkaconfig.go: the Kafka broker config names (`-c key=value`) and
//     the Config fields they set (KafkaConfigKeys, SetKafkaConfig).
//   - clusterid.go: stamping this node's cluster id into each shard's
//     FSM, by the shard's leader.
//   - quietlog.go: the logger wrapper that keeps hashicorp/raft's
//     per-shard repeats out of the log.
//
// What the Kafka handlers use (called from the connections' handler
// goroutines):
//
//   - apicluster.go: the node as package api sees it (api.Cluster,
//     api.FeatureStore): cluster's brokers and errors become api's, so
//     that api does not import cluster.
//   - topics.go: the topic registry: reads from the metadata FSM, writes
//     through the metadata group.
//   - metareads.go: metaReads, how requests consult this node's metadata
//     replica (read barriers on a miss, a staleness bound before allowing).
//   - acl.go: the ACL store of CreateAcls, DescribeAcls and DeleteAcls,
//     and the ACL index the auth.Authorizer decides by.
//   - sasl.go: SASL on the Kafka listener, the SCRAM credential store and
//     the superusers.
//   - tls.go: TLS on the Kafka listener, with certificates reloaded when
//     the files change or on SIGHUP (ReloadTLS), and mutual TLS.
//   - features.go: the feature levels: what ApiVersions advertises, the
//     /v1/cluster/features endpoints, and Fatal, which serve watches.
//
// HTTP endpoints (on net/http's goroutines; HTTPHandler mounts them all):
//
//   - http.go: /healthz, /readyz, /metrics, and HTTPHandler.
//   - admin.go: AdminHandler, the admin API under /v1/ (cluster status,
//     node removal, groups, timeline, features).
//   - statusapi.go: the groups, group and timeline views, gathered from
//     every node, that /v1/ and the status page answer.
//   - inspect.go: what a node answers of those views for its own shards:
//     the cluster.Inspector the other nodes call, and the types of the
//     reports (GroupSummary, GroupDetail, ...).
//   - timeline.go: Event and the node's timeline of rebalances and
//     leadership changes.
//   - statuspage.go: StatusPage, the HTML page for a person (/ and /group),
//     rendered from statuspage/page.html.
//   - faults.go: the fault-injection endpoints (/debug/faults/raft) of a
//     node started with FaultInjection, which the chaos suite uses.
//
// Metrics:
//
//   - metrics.go: the collector that reports the coordinators' and
//     shards' state at scrape time, so nothing on the request path
//     updates metrics.
//   - raftmetrics.go: ExportRaftMetrics, hashicorp/raft's go-metrics as
//     kcoord_raft_* (once per process).
//   - raftsink.go: the go-metrics sink behind it, which passes a few of
//     raft's metrics on without allocating on raft's hot goroutines.
//
// Tests:
//
//   - harness.go: in-process nodes and clusters for other packages' tests
//     and `kcoord bench report` (StartTestServer, StartTestCluster,
//     RestartTestNode, AddTestNode), taking a TB so the binary does not
//     link package testing.
//
// # Goroutines
//
// The Kafka listener's accept loop runs on a goroutine Start starts, and
// each connection's requests on transport's goroutines, which call into
// the api handlers and through them the stores above. cluster calls the
// leadership callback on a shard's leadership goroutine; a loss
// deactivates the coordinator there, a gain activates it on a goroutine
// of its own. HTTP handlers and inspections from other nodes block on
// calls to the other nodes and on leadership confirmations, within their
// context.
package server
