package fsm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// snapshotVersion is the snapshot format this build writes: one version byte
// followed by a JSON document. Readers accept versions up to it.
const snapshotVersion byte = 1

// writeSnapshot encodes v into sink and closes it, or cancels it on error.
func writeSnapshot(sink raft.SnapshotSink, v any) error {
	w := bufio.NewWriter(sink)
	err := w.WriteByte(snapshotVersion)
	if err == nil {
		err = json.NewEncoder(w).Encode(v)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// readSnapshot decodes a snapshot written by writeSnapshot into v.
func readSnapshot(r io.Reader, v any) error {
	br := bufio.NewReader(r)
	ver, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedSnapshot, err)
	}
	if ver == 0 || ver > snapshotVersion {
		return fmt.Errorf("%w: version %d", ErrMalformedSnapshot, ver)
	}
	if err := json.NewDecoder(br).Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedSnapshot, err)
	}
	return nil
}
