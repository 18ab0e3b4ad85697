// Package conformance is a differential conformance suite for kcoord's group
// coordinator: scripted conversations of raw Kafka requests, at pinned
// versions, are played against franz-go's kfake and against kcoord, and the
// two transcripts must match line by line.
//
// # Scripts
//
// A Scenario is a list of Steps. Each step names a member (a symbol such as
// "A"); every member has its own TCP connection, whose client id is the
// member's name. Steps:
//
//   - Do(m, req): send req on m's connection and wait for the answer;
//   - Send(m, req): send without waiting (a JoinGroup or SyncGroup that
//     blocks);
//   - Await(m): the answer to m's pending request;
//   - Wait(m, d): the answer if it comes within d, else "pending";
//   - Sleep(d);
//   - Group(steps...): a reusable fragment (fragments_test.go);
//   - Either(outcomes, steps...): racing requests whose answers depend on
//     the order the server serialises them in; every correct outcome is
//     listed.
//
// Member ids handed out by the server become symbols: an id
// "<client or instance id>-<uuid>" is written "$<client or instance id>",
// the second distinct id with the same prefix "$<prefix>2", and so on.
// Requests may name members by symbol ("$A"); the symbol is replaced by the
// id it is bound to when the request is sent.
//
// The consumer group protocol (KIP-848: ConsumerGroupHeartbeat,
// ConsumerGroupDescribe; requests_consumer.go) names members by the
// client's own ids from ConsumerGroupHeartbeat v1, which scripts write as
// literals ("m1"); an id a v0 server hands out becomes the joining
// member's symbol. It names topics by id, which differ between servers:
// scripts name topics by name, the runner learns each server's ids from
// its Metadata and swaps them in, and answers are printed by topic name.
//
// # Transcripts
//
// Each answer becomes one line: the member, the API and version, and the
// fields that matter (error codes by name, generations, member symbols,
// protocols, assignments, states, offsets), with throttles dropped and
// collections sorted where Kafka does not specify an order.
//
// # Kafka, kfake and kcoord
//
// Apache Kafka is the reference. kfake stands in for it where it behaves as
// Kafka does; where it departs, the step carries Kafka's answer with
// Step.Kafka, naming the Kafka source file the answer comes from, and kcoord
// is compared with that instead. The test fails if kfake starts answering as
// Kafka does (the override is then stale). A few departures of kfake affect
// every transcript (the form of member ids, client hosts and null offset
// metadata, and for KIP-848 the form of v0 member ids and the topic names
// of ConsumerGroupDescribe); they are normalised for kfake only, in
// normalize.go and normalize_consumer.go, each with its Kafka reference.
//
// Which Kafka: the answers are Apache Kafka 4.x's, the Java coordinator
// of group-coordinator/ behind KafkaApis. An override citing a .java
// source states 4.x; one citing GroupCoordinator.scala or
// GroupMetadataManager.scala states 3.7's answer where 4.x answers the
// same, or where the version is one 4.0 removed (KIP-896) and kcoord still
// serves, as 3.7 did. Where 3.7 and 4.x differ, the 4.x answer is the
// expected one, and docs/architecture.md lists the case.
// TestScenariosPlayEveryAdvertisedGroupAPIVersion fails when an advertised
// version of a group API is played by no scenario.
//
// The scripts live in the scenarios_*_test.go files; each scenario gets a
// kfake cluster and an in-process kcoord node of its own, configured alike
// (Config), with topics t1, t2 and t3 of three partitions. Run them with
//
//	go test ./conformance/
//
// and add -v to print every transcript.
//
// # Files
//
// The script language:
//
//   - dsl.go: Scenario, Step and the step builders (Do, Send, Await, Wait,
//     Sleep, Group, Either, Step.Kafka), and the servers' Config
//     (DefaultConfig, Topics, Partitions).
//   - requests.go: builders of the classic group requests at a pinned
//     version (Join, Sync, Heartbeat, Leave, Commit, Fetch, FindCoordinator,
//     Describe, List, DeleteGroups, OffsetDelete) and the Opt options that
//     adjust them (InGroup, Inst, Protocols, Assign, At, Of, ...).
//   - requests_consumer.go: the same for the consumer group protocol
//     (CJoin, CBeat, CDescribe and their options), and the placeholder ids
//     that name topics in requests until the runner swaps in the server's.
//
// Playing and printing:
//
//   - run.go: Run, which plays a scenario against one server and returns
//     its transcript: one connection per member, dialled on first use, and
//     per sent request a goroutine that waits for its answer, which the
//     script's goroutine takes with Await or Wait (bounded by
//     AwaitTimeout).
//   - normalize.go: the symbols of member ids, the rendering of each answer
//     into a transcript line, and the kfake-only normalisations of member
//     ids, client hosts and offset metadata.
//   - normalize_consumer.go: rendering and kfake normalisations of the
//     consumer group protocol's answers (v0 member ids, topics by name).
package conformance
