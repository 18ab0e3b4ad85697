package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reasons a frame closes its connection. Each is both the "reason" of the
// warn log line and the reason label of the request errors metric.
const (
	reasonFrameTooLarge      = "frame_too_large"
	reasonFrameTooSmall      = "frame_too_small"
	reasonMalformedHeader    = "malformed_header"
	reasonUnknownKey         = "unknown_api_key"
	reasonUnsupportedVersion = "unsupported_version"
	reasonMalformedBody      = "malformed_body"
	reasonDecodePanic        = "decode_panic"
	// reasonFrameExceedsPool: the frame is larger than the whole request
	// memory pool (queued.max.request.bytes). Logged at most once per
	// rejectLogInterval.
	reasonFrameExceedsPool = "frame_exceeds_queued_max_request_bytes"
)

// controlledShutdownKey is the one request whose v0 header has no client id.
const controlledShutdownKey = 7

// frameError is a protocol violation found while reading or decoding a
// frame; it closes the connection.
type frameError struct {
	reason       string
	size         int32 // frame size from the prefix
	hasHeader    bool  // key and version are known
	key, version int16
	err          error  // detail, may be nil
	stack        []byte // set when decoding panicked
}

func (e *frameError) Error() string {
	msg := e.reason
	if e.hasHeader {
		msg = fmt.Sprintf("%s (key %d, version %d)", msg, e.key, e.version)
	}
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *frameError) Unwrap() error { return e.err }

// inbound is one decoded request travelling from a connection's reader to its
// handler goroutine.
type inbound struct {
	key, version int16
	corr         int32
	clientID     string
	req          kmsg.Request // nil for an ApiVersions version transport does not serve
	fn           HandlerFunc  // nil for ApiVersions, which transport serves
	received     time.Time    // when the frame was fully read
	// poolBytes is the frame's size, held in the server's memoryPool
	// until the handler goroutine has written the response (or skipped
	// the request on a closing connection); then it releases them.
	poolBytes int64
	// raw is a SASL token sent without Kafka headers after SaslHandshake
	// v0 (sasl.go); key, version and req are then unset.
	raw []byte
	// lockstep: read before the connection authenticated, so the reader
	// waits for it to be served before reading the next frame.
	lockstep bool
}

// Config.PoolExemptFrameBytes (default 64 KiB) is the largest frame read
// outside the memory pool (queued.max.request.bytes). The pool reserves a frame's size once its
// size prefix is read, before the body arrives; were every frame reserved,
// two connections announcing 100 MiB frames and sending nothing more
// would hold a 200 MiB pool and stop every other connection, heartbeats
// included, until they idled out. Frames up to this size (heartbeats,
// commits, fetches, joins: nearly every request a group sends) are read
// without a reservation and allocated only as their bytes arrive
// (readFrameBody), so they keep flowing whatever holds the pool; each
// connection reads one frame at a time, so announced-but-unsent bytes are
// bounded by that much per connection.

// firstBodyChunk is how much body readFrameBody allocates before any of
// it arrived when the frame's bytes are not reserved in a bounded pool; it
// then doubles as bytes arrive, so a client announcing a frame gets memory
// only as it sends it.
const firstBodyChunk = 4 << 10

// readFrameSize reads a frame's 4-byte size prefix from r. I/O errors are
// returned as they are; a size out of [minFrameBytes, maxBytes] (of [0,
// maxBytes] for a raw SASL token) is a *frameError and nothing more is
// read.
func readFrameSize(r io.Reader, maxBytes int32, raw bool) (int32, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	switch {
	case size > maxBytes:
		return 0, &frameError{reason: reasonFrameTooLarge, size: size,
			err: fmt.Errorf("size %d is above the maximum %d", size, maxBytes)}
	case raw && size >= 0:
	case size < minFrameBytes:
		return 0, &frameError{reason: reasonFrameTooSmall, size: size,
			err: fmt.Errorf("size %d is below the minimum %d", size, minFrameBytes)}
	}
	return size, nil
}

// readFrameBody reads a frame body of size bytes from r. When reserved
// (the bytes are held in a bounded memoryPool) it allocates them at once,
// leaving no garbage behind; otherwise it allocates firstBodyChunk and
// doubles as bytes arrive. A frame cut short is io.ErrUnexpectedEOF.
func readFrameBody(r io.Reader, size int32, reserved bool) ([]byte, error) {
	if reserved {
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return body, nil
	}
	body := make([]byte, 0, min(int(size), firstBodyChunk))
	for len(body) < int(size) {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(cap(body), int(size)-len(body)))
		}
		n, err := r.Read(body[len(body):min(cap(body), int(size))])
		body = body[:len(body)+n]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// decodeRequest parses a frame body: the request header, then the body with
// kmsg at the header's version. It validates the key and version against
// mux, or against transport's own SASL versions when sasl is on. It never panics: a panic inside kmsg becomes a *frameError with the
// stack. Every error it returns is a *frameError.
func decodeRequest(mux *Mux, body []byte, sasl bool) (in *inbound, err error) {
	in = &inbound{}
	defer func() {
		if p := recover(); p != nil {
			in = nil
			err = &frameError{reason: reasonDecodePanic, size: int32(len(body)), hasHeader: true,
				key: peekInt16(body, 0), version: peekInt16(body, 2), err: fmt.Errorf("panic: %v", p), stack: debug.Stack()}
		}
	}()
	fail := func(reason string, detail error) (*inbound, error) {
		return nil, &frameError{reason: reason, size: int32(len(body)), hasHeader: true,
			key: in.key, version: in.version, err: detail}
	}
	if len(body) < minFrameBytes {
		return nil, &frameError{reason: reasonFrameTooSmall, size: int32(len(body))}
	}
	in.key = int16(binary.BigEndian.Uint16(body[0:]))
	in.version = int16(binary.BigEndian.Uint16(body[2:]))
	in.corr = int32(binary.BigEndian.Uint32(body[4:]))
	rest := body[minFrameBytes:]

	req := kmsg.RequestForKey(in.key)
	if req == nil {
		return fail(reasonUnknownKey, nil)
	}
	if in.key == apiVersionsKey {
		if in.version < 0 || in.version > apiVersionsMaxVersion {
			// Kafka answers without parsing the body (it may be a
			// future layout); the client id is best effort.
			if id, _, ok := readNullableString(rest); ok {
				in.clientID = id
			}
			return in, nil
		}
	} else if max := saslMaxVersion(in.key); sasl && max >= 0 {
		if in.version < 0 || in.version > max {
			return fail(reasonUnsupportedVersion, fmt.Errorf("%s is served at versions 0 to %d", kmsg.NameForKey(in.key), max))
		}
	} else {
		r, ok := mux.lookup(in.key)
		if !ok {
			return fail(reasonUnknownKey, fmt.Errorf("%s is not served", kmsg.NameForKey(in.key)))
		}
		if in.version < r.min || in.version > r.max {
			return fail(reasonUnsupportedVersion, fmt.Errorf("%s is served at versions %d to %d",
				kmsg.NameForKey(in.key), r.min, r.max))
		}
		in.fn = r.fn
	}
	req.SetVersion(in.version)
	if in.key != controlledShutdownKey || in.version != 0 {
		id, after, ok := readNullableString(rest)
		if !ok {
			return fail(reasonMalformedHeader, fmt.Errorf("bad client id"))
		}
		in.clientID, rest = id, after
	}
	if req.IsFlexible() {
		after, ok := skipTags(rest)
		if !ok {
			return fail(reasonMalformedHeader, fmt.Errorf("bad tagged fields"))
		}
		rest = after
	}
	if err := req.ReadFrom(rest); err != nil {
		return fail(reasonMalformedBody, err)
	}
	in.req = req
	return in, nil
}

// peekInt16 reads the big-endian int16 at off of b, or -1 when b is too short; it
// labels a decode panic without trusting anything else.
func peekInt16(b []byte, off int) int16 {
	if len(b) < off+2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(b[off:]))
}

// readNullableString reads a Kafka nullable string (int16 length, -1 for
// null, which reads as ""). ok is false when b is too short or the length is
// below -1.
func readNullableString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	switch {
	case n == -1:
		return "", b, true
	case n < 0 || n > len(b):
		return "", nil, false
	}
	return string(b[:n]), b[n:], true
}

// skipTags skips a tagged-field section (KIP-482): an unsigned varint count,
// then for each field a varint tag, a varint size and size bytes.
func skipTags(b []byte) ([]byte, bool) {
	n, b, ok := readUvarint32(b)
	for ; ok && n > 0; n-- {
		if _, b, ok = readUvarint32(b); !ok {
			break
		}
		var size uint32
		if size, b, ok = readUvarint32(b); !ok || uint64(size) > uint64(len(b)) {
			return nil, false
		}
		b = b[size:]
	}
	return b, ok
}

func readUvarint32(b []byte) (uint32, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > math.MaxUint32 {
		return 0, nil, false
	}
	return uint32(v), b[n:], true
}

// appendResponse appends the whole response frame to dst: the size prefix,
// the response header (correlation id, then an empty tagged-field section if
// the response is flexible, except for ApiVersions whose response header is
// always v0) and the body from kmsg. resp's version must be set.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
