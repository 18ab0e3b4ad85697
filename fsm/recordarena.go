package fsm

import (
	"fmt"
	"slices"
)

// recordArena holds variable-sized byte records in chunks of chunkSize
// bytes with no pointer in them, so that the garbage collector marks a
// chunk, not each record, and scans none (issue 36: a collection with a
// million groups live cost 195-260 ms when each group's offsets were
// objects reached through pointers, 1.4 ms without pointers). A record
// takes a slot of its size class; a freed slot goes on its class's free
// list for the next record of that class, so a chunk's memory is reused
// but never given back while the arena lives (a restore builds a new,
// compact one). A record larger than maxClassSize has a chunk of its own,
// given back when it is freed.
//
// Byte 0 of every slot is its class, which the arena writes and the
// record's owner must leave alone. The ShardFSM's lock guards it; reads
// (record) may run concurrently with each other, never with alloc or
// free.
type recordArena struct {
	chunks [][]byte
	// cur is the chunk slots are carved from, at tail; -1 for none yet.
	cur, tail int
	// free holds, per class, slots given back.
	free [][]recordRef
	// freeChunks are the indexes of chunks a large record gave back.
	freeChunks []uint32
}

// recordRef locates a record: its chunk's index above refOffsetBits, its
// offset in the chunk below.
type recordRef uint64

const (
	chunkSize     = 1 << 20
	refOffsetBits = 20
	// maxChunks bounds an arena's chunks (1 TiB of shared ones).
	maxChunks = 1 << 20
	// refBits is the bits a recordRef takes.
	refBits = refOffsetBits + 20
	// largeClass marks a slot that is a whole chunk of its own.
	largeClass = 255
)

// classSizes is the size of each class's slots: multiples of 32 up to
// 1 KiB (a group of a topic's 10 partitions takes about 300 bytes), then
// steps of about an eighth up to a quarter of a chunk; a slot wastes at
// most 31 bytes or an eighth of its size.
var classSizes = func() []int {
	var out []int
	for s := 32; s <= 1024; s += 32 {
		out = append(out, s)
	}
	for s := 1024; ; {
		s = (s + s/8 + 63) &^ 63
		if s > chunkSize/4 {
			break
		}
		out = append(out, s)
	}
	return out
}()

// maxClassSize is the largest record kept in a shared chunk.
var maxClassSize = classSizes[len(classSizes)-1]

func newRecordArena() recordArena {
	return recordArena{cur: -1, free: make([][]recordRef, len(classSizes))}
}

// classOf is the smallest class whose slots hold n bytes, or largeClass.
func classOf(n int) int {
	if n > maxClassSize {
		return largeClass
	}
	i, _ := slices.BinarySearch(classSizes, n)
	return i
}

// alloc returns a slot of at least n bytes (n ≥ 1), its class in byte 0
// and its other bytes as the last record of the slot left them.
func (a *recordArena) alloc(n int) recordRef {
	class := classOf(n)
	if class == largeClass {
		var c uint32
		if k := len(a.freeChunks); k > 0 {
			c, a.freeChunks = a.freeChunks[k-1], a.freeChunks[:k-1]
			a.chunks[c] = make([]byte, n)
		} else {
			c = a.addChunk(make([]byte, n))
		}
		a.chunks[c][0] = largeClass
		return recordRef(c) << refOffsetBits
	}
	var ref recordRef
	if free := a.free[class]; len(free) > 0 {
		ref, a.free[class] = free[len(free)-1], free[:len(free)-1]
	} else {
		size := classSizes[class]
		if a.cur < 0 || a.tail+size > chunkSize {
			a.cur, a.tail = a.newChunk(), 0
		}
		ref = recordRef(a.cur)<<refOffsetBits | recordRef(a.tail)
		a.tail += size
	}
	a.chunks[ref>>refOffsetBits][ref&(chunkSize-1)] = byte(class)
	return ref
}

// newChunk adds a shared chunk and returns its index.
func (a *recordArena) newChunk() int {
	if k := len(a.freeChunks); k > 0 {
		c := a.freeChunks[k-1]
		a.freeChunks = a.freeChunks[:k-1]
		a.chunks[c] = make([]byte, chunkSize)
		return int(c)
	}
	return int(a.addChunk(make([]byte, chunkSize)))
}

// addChunk appends c to the chunks and returns its index. Past maxChunks
// it panics: a ref could not name the chunk, and a shard holding a
// terabyte of offsets has gone wrong long before.
func (a *recordArena) addChunk(c []byte) uint32 {
	if len(a.chunks) >= maxChunks {
		panic(fmt.Sprintf("fsm: a shard's group records outgrew %d chunks", maxChunks))
	}
	a.chunks = append(a.chunks, c)
	return uint32(len(a.chunks) - 1)
}

// record returns ref's whole slot, byte 0 (its class) included.
func (a *recordArena) record(ref recordRef) []byte {
	c := a.chunks[ref>>refOffsetBits]
	off := int(ref & (chunkSize - 1))
	if c[off] == largeClass {
		return c
	}
	return c[off : off+classSizes[c[off]] : off+classSizes[c[off]]]
}

// release gives ref's slot back.
func (a *recordArena) release(ref recordRef) {
	c := uint32(ref >> refOffsetBits)
	off := int(ref & (chunkSize - 1))
	class := a.chunks[c][off]
	if class == largeClass {
		a.chunks[c] = nil
		a.freeChunks = append(a.freeChunks, c)
		return
	}
	a.free[class] = append(a.free[class], ref)
}

// readOnlyClone is a copy of a's records, sharing no memory with it, for
// record only (it has no free lists to alloc or release with): a
// snapshot's copy, which Persist reads while applies go on.
func (a *recordArena) readOnlyClone() recordArena {
	out := recordArena{chunks: make([][]byte, len(a.chunks)), cur: -1}
	for i, c := range a.chunks {
		out.chunks[i] = slices.Clone(c)
	}
	return out
}

// bytes is the memory a's chunks take.
func (a *recordArena) bytes() int {
	n := 0
	for _, c := range a.chunks {
		n += len(c)
	}
	return n
}
