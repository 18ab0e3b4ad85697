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
//     When Config.MaxInFlightRequests requests of the connection are queued or
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
