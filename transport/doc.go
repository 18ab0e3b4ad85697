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
package transport
