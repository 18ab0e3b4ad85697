package groups

import "math"

// replacementChar is U+FFFD, the UTF-16 unit Java's UTF-8 decoder substitutes
// for malformed input.
const replacementChar = 0xFFFD

// JavaStringHashCode returns Java's String.hashCode of s: h = 31*h + c over the
// UTF-16 code units c of the string, with int32 wrap-around.
//
// s is taken to be UTF-8, the encoding of strings in the Kafka protocol. Valid
// UTF-8 gives the same code units as Java. Invalid UTF-8 is decoded exactly as
// the JDK's UTF-8 decoder does in new String(bytes, UTF_8), which is what a
// Kafka broker does with the bytes on the wire: one U+FFFD for each maximal
// invalid subpart (a truncated but otherwise valid prefix such as E6 97 counts
// once; a byte that can start or continue nothing counts alone), and one U+FFFD
// for a three-byte encoded surrogate (ED A0..BF 80..BF), which the JDK rejects
// as a whole. testdata/invalid_utf8.tsv holds cases computed by a JDK 17.
func JavaStringHashCode(s string) int32 {
	var h int32
	for i := 0; i < len(s); {
		b1 := s[i]
		if b1 < 0x80 {
			h = 31*h + int32(b1)
			i++
			continue
		}
		r, n := decodeJavaUTF8(s[i:])
		i += n
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// PartitionFor is Kafka's GroupCoordinator partitionFor: Utils.abs(hashCode) %
// n, where Utils.abs(Integer.MIN_VALUE) is 0. n must be positive; PartitionFor
// panics otherwise, as Java's % does for zero.
func PartitionFor(groupID string, n int32) int32 {
	if n <= 0 {
		panic("groups: PartitionFor with a non-positive partition count")
	}
	return javaAbs(JavaStringHashCode(groupID)) % n
}

// javaAbs is Kafka's Utils.abs: Math.abs except that Integer.MIN_VALUE maps to
// 0 rather than to itself.
func javaAbs(v int32) int32 {
	if v == math.MinInt32 {
		return 0
	}
	if v < 0 {
		return -v
	}
	return v
}

func isCont(b byte) bool { return b&0xC0 == 0x80 }

// decodeJavaUTF8 decodes one code point from the non-empty, non-ASCII start of
// s the way the JDK's UTF-8 decoder does with REPLACE, returning the code point
// (U+FFFD for malformed input) and how many bytes it consumed.
func decodeJavaUTF8(s string) (rune, int) {
	b1 := s[0]
	switch {
	case b1 >= 0xC2 && b1 <= 0xDF: // two bytes
		if len(s) < 2 || !isCont(s[1]) {
			return replacementChar, 1
		}
		return rune(b1&0x1F)<<6 | rune(s[1]&0x3F), 2

	case b1 >= 0xE0 && b1 <= 0xEF: // three bytes
		if len(s) < 2 || !isCont(s[1]) || (b1 == 0xE0 && s[1] < 0xA0) {
			return replacementChar, 1
		}
		if len(s) < 3 || !isCont(s[2]) {
			return replacementChar, 2
		}
		r := rune(b1&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F)
		if r >= 0xD800 && r <= 0xDFFF { // encoded surrogate: the JDK replaces all three bytes
			return replacementChar, 3
		}
		return r, 3

	case b1 >= 0xF0 && b1 <= 0xF4: // four bytes
		if len(s) < 2 || !isCont(s[1]) ||
			(b1 == 0xF0 && s[1] < 0x90) || (b1 == 0xF4 && s[1] > 0x8F) {
			return replacementChar, 1
		}
		if len(s) < 3 || !isCont(s[2]) {
			return replacementChar, 2
		}
		if len(s) < 4 || !isCont(s[3]) {
			return replacementChar, 3
		}
		return rune(b1&0x07)<<18 | rune(s[1]&0x3F)<<12 | rune(s[2]&0x3F)<<6 | rune(s[3]&0x3F), 4

	default: // a continuation byte, C0, C1 or F5..FF
		return replacementChar, 1
	}
}
