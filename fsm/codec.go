package fsm

import (
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// msgpack is the handle of every msgpack body and snapshot. It is configured
// once here and never changed after (handles are safe for concurrent use
// once in use, and must not be modified then).
var msgpack = newMsgpackHandle()

func newMsgpackHandle() *codec.MsgpackHandle {
	h := new(codec.MsgpackHandle)
	// The current msgpack spec: strings as str, []byte as bin, so byte
	// fields decode as bytes and never pass through a string.
	h.WriteExt = true
	// Map keys (Topic.Configs) sorted: one value, one encoding.
	h.Canonical = true
	// Streams (snapshots) go through the codec's own buffers, so a snapshot
	// is encoded and decoded without holding all of it in memory.
	h.WriterBufferSize = 64 << 10
	h.ReaderBufferSize = 64 << 10
	return h
}
