package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	rtmetrics "runtime/metrics"
	"testing"
)

// Limits of the fuzzed reader: small enough that a random size prefix is
// usually over the limit and a frame within it is cheap to allocate, with
// frames above the pool exemption reserved in a bounded pool.
const (
	fuzzMaxRequestBytes      = 1 << 20
	fuzzPoolExemptFrameBytes = 64 << 10
	fuzzQueuedMaxBytes       = 2 * fuzzMaxRequestBytes
)

// kcoordMux serves the keys and version ranges api.Handlers.Register
// serves (transport cannot import api), with nopHandler.
func kcoordMux() *Mux {
	m := NewMux()
	for _, r := range []struct{ key, max int16 }{
		{3, 13}, {10, 6}, {11, 9}, {14, 5}, {12, 4}, {13, 5}, {8, 9}, {9, 9},
		{15, 6}, {16, 5}, {42, 2}, {47, 0}, {19, 7}, {20, 6}, {2, 10}, {1, 12},
	} {
		m.Handle(r.key, 0, r.max, nopHandler)
	}
	return m
}

// newFuzzReader returns a connection of a server that was never started,
// for its reader alone: readRequest needs only the server's config, pool
// and mux, and the connection's ctx.
func newFuzzReader(tb testing.TB) *conn {
	cfg := DefaultConfig()
	cfg.MaxRequestBytes = fuzzMaxRequestBytes
	cfg.PoolExemptFrameBytes = fuzzPoolExemptFrameBytes
	cfg.QueuedMaxRequestBytes = fuzzQueuedMaxBytes
	srv, err := NewServer(cfg, kcoordMux())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return &conn{srv: srv, ctx: context.Background()}
}

// heapAllocBytes is the bytes the process allocated so far (a cheap
// runtime metric, no stop-the-world).
func heapAllocBytes() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzFrameDecoding feeds arbitrary bytes, as a client's stream, to the
// reader path a connection runs (conn.readRequest: size prefix, pool
// reservation, body, request header and kmsg body), frame after frame until
// it fails. Properties: it never panics (a panic kmsg raised while decoding
// is recovered, and still fails here as a decoder bug worth reporting); it
// ends with io.EOF only at a frame boundary, io.ErrUnexpectedEOF inside a
// frame, or a *frameError; a size prefix over the limit is refused having
// read nothing more and allocated nothing near its size; a decoded request
// is one the mux serves at that version; and every byte reserved in the
// memory pool is released.
func FuzzFrameDecoding(f *testing.F) {
	c := newFuzzReader(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		src := bytes.NewReader(stream)
		br := bufio.NewReaderSize(src, readBufferBytes)
		consumed := func() int { return len(stream) - src.Len() - br.Buffered() }
		for {
			start := consumed()
			before := heapAllocBytes()
			in, err := c.readRequest(br)
			if err == nil {
				checkDecoded(t, c.srv.mux, in)
				c.srv.pool.release(in.poolBytes)
				continue
			}
			checkReadEnd(t, err, stream, start, consumed(), heapAllocBytes()-before)
			break
		}
		if held := c.srv.pool.usedBytes.Load(); held != 0 {
			t.Fatalf("%d bytes still held in the memory pool", held)
		}
	})
}

// checkReadEnd checks the error that ended reading a stream; the frame it
// ended in began at start, the reader has consumed bytes, and allocated
// that many bytes meanwhile.
func checkReadEnd(t *testing.T, err error, stream []byte, start, consumed int, allocated uint64) {
	t.Helper()
	left := len(stream) - start
	var fe *frameError
	switch {
	case errors.As(err, &fe):
		if fe.stack != nil {
			t.Fatalf("decoding panicked: %v\n%s", fe.err, fe.stack)
		}
		if fe.reason == reasonFrameTooLarge || fe.reason == reasonFrameTooSmall {
			if consumed != start+4 {
				t.Fatalf("%s: read %d bytes of the frame, want only its 4-byte size", fe.reason, consumed-start)
			}
		}
		if fe.reason == reasonFrameTooLarge {
			if fe.size <= fuzzMaxRequestBytes {
				t.Fatalf("a frame of %d bytes refused as too large", fe.size)
			}
			if allocated >= uint64(fe.size)/2 {
				t.Fatalf("refusing a frame of %d bytes allocated %d bytes", fe.size, allocated)
			}
		}
	case errors.Is(err, io.EOF):
		if left != 0 {
			t.Fatalf("io.EOF with %d bytes of a frame unread", left)
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		if left == 0 {
			t.Fatal("io.ErrUnexpectedEOF at a frame boundary")
		}
	default:
		t.Fatalf("reading ended with %T: %v", err, err)
	}
}

// checkDecoded checks a request the reader accepted.
func checkDecoded(t *testing.T, mux *Mux, in *inbound) {
	t.Helper()
	if in.key == apiVersionsKey {
		if in.version >= 0 && in.version <= apiVersionsMaxVersion && in.req == nil {
			t.Fatalf("ApiVersions v%d decoded without a request", in.version)
		}
		return
	}
	r, ok := mux.lookup(in.key)
	if !ok || in.version < r.min || in.version > r.max || in.req == nil || in.fn == nil {
		t.Fatalf("accepted key %d version %d", in.key, in.version)
	}
	if in.req.GetVersion() != in.version || in.req.Key() != in.key {
		t.Fatalf("request %d v%d decoded as %d v%d", in.key, in.version, in.req.Key(), in.req.GetVersion())
	}
	if in.poolBytes != 0 && in.poolBytes <= fuzzPoolExemptFrameBytes {
		t.Fatalf("a frame of %d bytes, exempt from the pool, holds pool bytes", in.poolBytes)
	}
}
