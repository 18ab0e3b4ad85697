package fsm

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Snapshot versions: a snapshot's first byte.
const (
	// snapshotVersionJSON is a JSON document (the json tags), written by
	// releases before msgpack and still read.
	snapshotVersionJSON byte = 1
	// snapshotVersionMsgpack is one msgpack value (the codec tags).
	snapshotVersionMsgpack byte = 2
	// snapshotVersion is the version this build writes; readers accept
	// every version up to it.
	snapshotVersion = snapshotVersionMsgpack
)

// writeSnapshot writes the version byte and streams doc into sink as
// msgpack (through the codec's buffer: the encoding is never whole in
// memory), then closes sink, or cancels it on error.
func writeSnapshot(sink raft.SnapshotSink, doc any) error {
	_, err := sink.Write([]byte{snapshotVersion})
	if err == nil {
		err = codec.NewEncoder(sink, msgpack).Encode(doc)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// readSnapshot decodes a snapshot written by writeSnapshot, or by a release
// that wrote JSON snapshots (version 1), into doc.
func readSnapshot(r io.Reader, doc any) error {
	var ver [1]byte
	if _, err := io.ReadFull(r, ver[:]); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedSnapshot, err)
	}
	var err error
	switch ver[0] {
	case snapshotVersionJSON:
		err = json.NewDecoder(r).Decode(doc)
	case snapshotVersionMsgpack:
		err = decodeOne(r, doc)
	default:
		return fmt.Errorf("%w: version %d", ErrMalformedSnapshot, ver[0])
	}
	if err != nil {
		return fmt.Errorf("%w: version %d: %v", ErrMalformedSnapshot, ver[0], err)
	}
	return nil
}

// decodeOne decodes one msgpack value from r into v and checks that r ends
// after it.
func decodeOne(r io.Reader, v any) error {
	cr := &countingReader{r: r}
	d := codec.NewDecoder(cr, msgpack)
	if err := d.Decode(v); err != nil {
		return err
	}
	// The decoder reads ahead into its buffer: whatever it read beyond the
	// value, and whatever is left in r, follows the document.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return err
	}
	if extra := cr.n - int64(d.NumBytesRead()); extra != 0 {
		return fmt.Errorf("%d bytes after the document", extra)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
