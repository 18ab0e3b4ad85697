// Package transport is kcoord's Kafka wire-protocol server. It accepts TCP
// connections, splits the byte stream into size-prefixed frames, decodes the
// request header and body with franz-go's kmsg, serves ApiVersions itself from
// the Mux table, and dispatches every other request to the HandlerFunc
// registered for its API key.
//
// # Goroutines
//
// Server.Serve runs the accept loop on its caller's goroutine. Each accepted
// connection gets goroutines of its own:
//
//   - The reader reads frames, decodes them (kmsg ReadFrom runs here) and
//     queues them. It keeps reading while a handler blocks, so a client that
//     hangs up is noticed at once and the connection's context is cancelled.
//     Before reading a frame's body it reserves the frame's size in the
//     server's request memory pool, waiting while the pool is full. When
//     Config.MaxInFlightRequests requests of the connection are queued or
//     being handled, it waits before queueing another.
//   - The handler goroutine takes requests off the queue one at a time, in
//     arrival order, calls the HandlerFunc, and writes its response before it
//     takes the next one, so responses leave in request order as Kafka
//     clients require.
//   - A closer goroutine closes the socket once the connection's context is
//     cancelled, whoever cancelled it.
//
// A HandlerFunc may block (a JoinGroup waits for its rebalance), which holds
// up only its own connection. It must return soon after its ctx is cancelled:
// Server.Close waits for every handler to return.
//
// # Limits
//
// Config.QueuedMaxRequestBytes (queued.max.request.bytes) bounds the bytes
// of request frames held in memory over all connections: a frame counts
// from its size prefix until its response is written (or its connection
// closes), read-ahead frames included. A reader whose next frame does not
// fit stops reading (TCP pushes back on its client, as Kafka mutes the
// channel) until bytes come back, its connection closes or the server
// closes; other connections carry on, and a frame that fits may pass one
// that waits. The pool also makes a reader collect garbage before it
// allocates a frame when released frames may still occupy the heap, so
// frames occupy about the pool's size in the heap, not twice it. Kafka's
// default is -1 (unbounded); kcoord's is 200 MiB.
//
// Config.MaxConnections (max.connections) and Config.MaxConnectionsPerIP
// (max.connections.per.ip) bound the connections open at once, in all and
// per client IP address. A connection over either is closed right after
// accept (Kafka's acceptor waits for a slot under max.connections
// instead), counted in kcoord_transport_connections_rejected_total by
// limit, and logged at warn at most once per 10 s per limit.
//
// # Request memory
//
// The request memory pool (memoryPool, pool.go) is how
// Config.QueuedMaxRequestBytes is enforced.
//
// Grants are strict: a frame is granted only when all of it fits, so the
// bytes held never exceed the capacity. (Kafka's SocketServer builds its
// SimpleMemoryPool non-strict: it grants any size while one byte is free,
// bounding memory at capacity plus one max request.) Waiters are granted in
// arrival order, except that a frame that fits may pass an older one that
// does not, so small requests such as heartbeats keep flowing while a large
// frame waits; a large frame thus waits for as long as smaller ones keep
// the pool too full for it.
//
// Released is not yet free: Go frees a frame's memory only at a
// collection after its release, and by default lets the heap grow to twice
// what is live before collecting, so frames released and granted anew in
// quick succession could occupy the pool's capacity several times over.
// The pool therefore also counts the bytes released and perhaps not yet
// freed (collections the runtime runs on its own age them out, see
// memoryPool.rotateLocked). When, after a grant, those plus the bytes held
// exceed the capacity by more than collectSlack (an eighth of it), the
// granted reader runs a collection (runtime.GC) before allocating its
// frame, and readers granted meanwhile wait for that collection
// (memoryPool.collectIfCrowded). So request frames occupy at most about
// capacity + collectSlack of heap, as long as
// handlers keep no slice of a request (kmsg aliases a request's byte
// fields into its frame). Collections are forced only when released frames
// pile up faster than the runtime collects them on its own, at most once
// per collectSlack bytes released, and block only a reader about to
// allocate a frame.
//
// # Protocol errors
//
// As in Kafka, a frame larger than Config.MaxRequestBytes or too short to hold
// a header, an API key that is unknown or not registered, a version outside
// the registered range and a body that fails to decode all close the
// connection, with a warn log line carrying remote, key, version and reason.
// ApiVersions is the exception: any version it does not serve is answered
// with UNSUPPORTED_VERSION encoded as ApiVersions v0 whose ApiKeys hold only
// ApiVersions' own range (KIP-511, as Kafka does), so clients retry with a
// version served. A panic while decoding or inside a handler is recovered,
// logged with its stack, and closes only that connection. A connection idle
// for Config.IdleTimeout is closed.
//
// # Files
//
// Serving:
//
//   - server.go: Server (NewServer, Listen, Serve, Open, Close) and the
//     accept loop, which starts each connection's goroutines.
//   - config.go: Config, its defaults and Validate.
//   - conn.go: one connection: its reader (readLoop), handler (handleLoop)
//     and closer goroutines, TLS handshake, dispatch and response writing.
//   - frame.go: reading size-prefixed frames, decoding the request header
//     and body (decodeRequest, on the reader goroutine) and framing
//     responses; the reasons a frame closes its connection.
//   - mux.go: Mux, the table of API keys, version ranges and HandlerFuncs
//     that also yields what ApiVersions advertises.
//   - handler.go: HandlerFunc and RequestContext, the contract between
//     transport and the handlers of package api.
//   - apiversions.go: the ApiVersions answer, served on the handler
//     goroutine from the Mux table, and the Features it advertises.
//   - sasl.go: SASL on a connection (SaslHandshake, SaslAuthenticate, raw
//     tokens, re-authentication, KIP-368), driven by the handler goroutine
//     through the SASL interface that auth.Authenticator implements.
//   - clienthost.go: the client host as Kafka reports it
//     (RequestContext.ClientHost).
//
// Limits:
//
//   - pool.go: the request memory pool (see # Request memory): readers
//     acquire, whoever is done with a frame releases.
//   - limits.go: max.connections and max.connections.per.ip, checked on
//     the accept loop's goroutine, and the log limiter for rejections.
//   - idle.go: the reader under each connection that enforces
//     Config.IdleTimeout.
//
// Around the server:
//
//   - metrics.go: the Prometheus collectors (kcoord_transport_*); a nil
//     *metrics records nothing, and every method is safe from any goroutine.
//   - errors.go: the sentinel errors of Server, Config and RawClient.
//   - rawclient.go: RawClient, a raw protocol client with no negotiation or
//     retries, for tests, the conformance suite and the chaos suite's raw
//     clients; NewTestLogger and StartTestServer for tests of packages
//     that serve through transport.
package transport
