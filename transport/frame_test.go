package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// readFrame reads one frame as the reader does, without a pool.
func readFrame(r *bufio.Reader, maxBytes int32, reserved bool) ([]byte, error) {
	size, err := readFrameSize(r, maxBytes, false)
	if err != nil {
		return nil, err
	}
	return readFrameBody(r, size, reserved)
}

// TestReadFrameBody: a body is read whole, allocated at once when its
// bytes are reserved in the pool and grown as it arrives otherwise, and a
// frame cut short is an unexpected EOF either way.
func TestReadFrameBody(t *testing.T) {
	const testBodyBytes = 1 << 20
	body := bytes.Repeat([]byte{7}, 3*testBodyBytes+5)
	for _, reserved := range []bool{false, true} {
		got, err := readFrame(bufio.NewReader(bytes.NewReader(frameOf(body))), 4*testBodyBytes, reserved)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("reserved %v: readFrame: %v, %d bytes", reserved, err, len(got))
		}
		_, err = readFrame(bufio.NewReader(bytes.NewReader(frameOf(body)[:testBodyBytes+10])), 4*testBodyBytes, reserved)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("reserved %v: truncated frame: %v", reserved, err)
		}
		_, err = readFrame(bufio.NewReader(bytes.NewReader(frameOf(body)[:4])), 4*testBodyBytes, reserved)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("reserved %v: frame without body: %v", reserved, err)
		}
	}
}

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		rest []byte
		ok   bool
	}{
		{[]byte{0, 9}, []byte{9}, true},
		{[]byte{2, 1, 1, 'a', 2, 0, 9}, []byte{9}, true},
		{[]byte{1, 1, 5, 'a'}, nil, false},                 // size beyond input
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, nil, false}, // count above uint32, then nothing
		{[]byte{}, nil, false},
		{[]byte{3, 1, 0}, nil, false}, // count beyond fields
	} {
		rest, ok := skipTags(tc.in)
		if ok != tc.ok || (ok && !bytes.Equal(rest, tc.rest)) {
			t.Errorf("skipTags(% x) = % x, %v; want % x, %v", tc.in, rest, ok, tc.rest, tc.ok)
		}
	}
}

// fuzzMux serves a few keys over flexible and non-flexible versions.
func fuzzMux() *Mux {
	m := NewMux()
	for _, key := range []int16{3, 8, 9, 10, 11, 12, 13, 14, 15} { // Metadata, group coordinator APIs
		m.Handle(key, 0, kmsg.RequestForKey(key).MaxVersion(), nopHandler)
	}
	return m
}

// FuzzFrame feeds arbitrary frame bodies to the decoding path the reader
// runs. Decoding must either fail with a *frameError or yield a request the
// mux serves at that version. A panic inside kmsg is recovered by
// decodeRequest (the server survives it) but fails the fuzz test, since it
// is a decoder bug worth reporting.
func FuzzFrame(f *testing.F) {
	mux := fuzzMux()
	for _, key := range []int16{3, 11, 12, 14, 18} {
		req := kmsg.RequestForKey(key)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(rawRequest(req, int32(v))[4:])
		}
	}
	f.Add([]byte{})
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeRequest(mux, body, true)
		if err != nil {
			var fe *frameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *frameError: %v", err, err)
			}
			if fe.stack != nil {
				t.Fatalf("decoding panicked: %v\n%s", fe.err, fe.stack)
			}
			return
		}
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
	})
}
