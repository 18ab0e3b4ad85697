package transport

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// idleReader is the socket reader under a connection's bufio.Reader. It
// enforces Config.IdleTimeout (Kafka's connections.max.idle.ms): reading
// fails with errIdle once the connection has had no request in flight,
// received no byte and written no response for that long. It only ever
// runs on the connection's reader goroutine.
type idleReader struct {
	nc      net.Conn
	idle    time.Duration
	busy    func() bool   // a request is queued or being handled
	lastOut *atomic.Int64 // unix nanos of the last response written
}

// errIdle ends a connection idle for Config.IdleTimeout.
var errIdle = errors.New("connection idle")

func (r *idleReader) Read(p []byte) (int, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(r.idle))
	for {
		n, err := r.nc.Read(p)
		var ne net.Error
		if n > 0 || err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return n, err
		}
		now := time.Now()
		switch last := time.Unix(0, r.lastOut.Load()); {
		case r.busy():
			_ = r.nc.SetReadDeadline(now.Add(r.idle))
		case now.Sub(last) < r.idle:
			_ = r.nc.SetReadDeadline(last.Add(r.idle))
		default:
			return 0, errIdle
		}
	}
}
