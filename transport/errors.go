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

	// ErrNoPendingRequest is returned by Client.Recv when no request sent
	// with Client.Send is waiting for its response.
	ErrNoPendingRequest = errors.New("transport: no request awaiting a response")

	// ErrCorrelationMismatch is returned by Client.Recv when a response
	// carries a correlation id other than the one of the oldest request
	// awaiting its response.
	ErrCorrelationMismatch = errors.New("transport: response correlation id mismatch")
)
