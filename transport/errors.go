package transport

import "errors"

var (
	// ErrServerClosed is returned by Server.Listen once Server.Close has been
	// called.
	ErrServerClosed = errors.New("transport: server closed")

	// ErrAlreadyListening is returned by a second call to Server.Listen.
	ErrAlreadyListening = errors.New("transport: server already listening")

	// ErrAlreadyServing is returned by a second concurrent call to
	// Server.Serve.
	ErrAlreadyServing = errors.New("transport: server already serving")

	// ErrInvalidConfig wraps every error returned by Config.Validate.
	ErrInvalidConfig = errors.New("transport: invalid config")

	// ErrFrameExceedsQueuedMaxRequestBytes closes a connection whose frame
	// is larger than the whole request memory pool (Config.
	// QueuedMaxRequestBytes), so it could never be granted. Validate
	// rules it out for frames within MaxRequestBytes; it is a backstop.
	ErrFrameExceedsQueuedMaxRequestBytes = errors.New("transport: request frame larger than queued.max.request.bytes")

	// ErrMaxConnections rejects a connection accepted while
	// Config.MaxConnections (max.connections) connections are open.
	ErrMaxConnections = errors.New("transport: max.connections reached")

	// ErrMaxConnectionsPerIP rejects a connection accepted while
	// Config.MaxConnectionsPerIP (max.connections.per.ip) connections from
	// its IP address are open.
	ErrMaxConnectionsPerIP = errors.New("transport: max.connections.per.ip reached")

	// ErrNoPendingRequest is returned by Client.Recv when no request sent
	// with Client.Send is waiting for its response.
	ErrNoPendingRequest = errors.New("transport: no request awaiting a response")

	// ErrCorrelationMismatch is returned by Client.Recv when a response
	// carries a correlation id other than the one of the oldest request
	// awaiting its response.
	ErrCorrelationMismatch = errors.New("transport: response correlation id mismatch")
)
