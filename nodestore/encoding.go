package nodestore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// logEncodingVersion is the first byte of every stored log entry. Version 1,
// all integers big-endian:
//
//	version(1) index(8) term(8) type(1) appendedAt(8, Unix ns, 0 = zero time)
//	len(data)(4) data len(extensions)(4) extensions
//
// A new encoding takes a new version byte, and decodeLog keeps reading
// every older one.
const logEncodingVersion = 1

// logHeaderLen is the length of version 1 up to and including len(data).
const logHeaderLen = 1 + 8 + 8 + 1 + 8 + 4

func encodeLog(l *raft.Log) []byte {
	return appendLog(make([]byte, 0, encodedLogLen(l)), l)
}

// encodedLogLen is the length of l encoded.
func encodedLogLen(l *raft.Log) int { return logHeaderLen + len(l.Data) + 4 + len(l.Extensions) }

// appendLog appends l, encoded, to b.
func appendLog(b []byte, l *raft.Log) []byte {
	b = append(b, logEncodingVersion)
	b = binary.BigEndian.AppendUint64(b, l.Index)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Extensions)))
	return append(b, l.Extensions...)
}

// decodeLog fills l from v, copying everything out of v: bolt's memory is
// only valid inside the transaction. Empty Data and Extensions decode as
// nil.
func decodeLog(v []byte, l *raft.Log) error {
	if len(v) < logHeaderLen || v[0] != logEncodingVersion {
		return corruptEntry(v)
	}
	l.Index = binary.BigEndian.Uint64(v[1:])
	l.Term = binary.BigEndian.Uint64(v[9:])
	l.Type = raft.LogType(v[17])
	l.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[18:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	rest := v[logHeaderLen:]
	n := uint64(binary.BigEndian.Uint32(v[26:]))
	if uint64(len(rest)) < n+4 {
		return corruptEntry(v)
	}
	l.Data = nil
	if n > 0 {
		l.Data = append([]byte(nil), rest[:n]...)
	}
	rest = rest[n:]
	m := uint64(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if uint64(len(rest)) != m {
		return corruptEntry(v)
	}
	l.Extensions = nil
	if m > 0 {
		l.Extensions = append([]byte(nil), rest...)
	}
	return nil
}

func corruptEntry(v []byte) error {
	var version byte
	if len(v) > 0 {
		version = v[0]
	}
	return fmt.Errorf("%w: log entry of %d bytes, encoding version %d", ErrCorrupt, len(v), version)
}
