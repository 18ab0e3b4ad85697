package groups

import (
	"bufio"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// readTSV returns the non-comment rows of a testdata TSV file.
func readTSV(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func decodeHexCol(t *testing.T, s string) string {
	t.Helper()
	if s == "-" {
		return ""
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return string(b)
}

func atoi32(t *testing.T, s string) int32 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		t.Fatalf("bad int32 %q: %v", s, err)
	}
	return int32(v)
}

// TestPartitionForJVM checks against hashes and partitions computed by a JVM.
func TestPartitionForJVM(t *testing.T) {
	rows := readTSV(t, "testdata/partition_for.tsv")
	if len(rows) < 40 {
		t.Fatalf("only %d rows in partition_for.tsv", len(rows))
	}
	for _, r := range rows {
		if len(r) != 5 {
			t.Fatalf("bad row %q", r)
		}
		id := decodeHexCol(t, r[0])
		if got, want := JavaStringHashCode(id), atoi32(t, r[1]); got != want {
			t.Errorf("JavaStringHashCode(%q) = %d, want %d", id, got, want)
		}
		for i, n := range []int32{50, 16, 1} {
			if got, want := PartitionFor(id, n), atoi32(t, r[2+i]); got != want {
				t.Errorf("PartitionFor(%q, %d) = %d, want %d", id, n, got, want)
			}
		}
	}
}

// TestJavaStringHashCodeInvalidUTF8 checks malformed UTF-8 against a JDK's
// new String(bytes, UTF_8).hashCode() (testdata/invalid_utf8.tsv, generated
// by JDK 17 with fixed edge cases and 300 seeded random byte strings).
func TestJavaStringHashCodeInvalidUTF8(t *testing.T) {
	rows := readTSV(t, "testdata/invalid_utf8.tsv")
	if len(rows) < 300 {
		t.Fatalf("only %d rows in invalid_utf8.tsv", len(rows))
	}
	for _, r := range rows {
		if len(r) != 3 {
			t.Fatalf("bad row %q", r)
		}
		s := decodeHexCol(t, r[0])
		if got, want := JavaStringHashCode(s), atoi32(t, r[1]); got != want {
			t.Errorf("JavaStringHashCode(%x) = %d, want %d (JDK UTF-16: %s, ours: %s)",
				s, got, want, r[2], unitsOf(s))
		}
	}
}

// unitsOf is the UTF-16 units our decoder produces for s, for failure messages.
func unitsOf(s string) string {
	var parts []string
	for i := 0; i < len(s); {
		var r rune
		n := 1
		if s[i] < 0x80 {
			r = rune(s[i])
		} else {
			r, n = decodeJavaUTF8(s[i:])
		}
		i += n
		for _, u := range utf16.Encode([]rune{r}) {
			parts = append(parts, strconv.FormatUint(uint64(u)|0x10000, 16)[1:])
		}
	}
	return strings.Join(parts, " ")
}

// javaHashOfUnits is String.hashCode spelled out over UTF-16 units.
func javaHashOfUnits(units []uint16) int32 {
	var h int32
	for _, u := range units {
		h = 31*h + int32(u)
	}
	return h
}

func TestJavaStringHashCodeExplicit(t *testing.T) {
	cases := []struct {
		name string
		s    string
		want int32
	}{
		{"empty", "", 0},
		{"ascii a", "a", 97},
		{"ascii", "test", 3556498},
		{"ascii group", "my-consumer-group", 1513705513},
		{"BMP e-acute", "é", 233},
		{"BMP CJK", "日本", 0x65E5*31 + 0x672C},
		{"emoji surrogate pair", "😀", 0xD83D*31 + 0xDE00},
		{"emoji in text", "😀group", javaHashOfUnits(utf16.Encode([]rune("😀group")))},
		{"Integer.MIN_VALUE", "polygenelubricants", math.MinInt32},
		{"Integer.MIN_VALUE 2", "GydZG_", math.MinInt32},
		{"Integer.MIN_VALUE 3", "DESIGNING WORKHOUSES", math.MinInt32},
		{"U+FFFF", "\uffff", 0xFFFF},
		{"U+10FFFF", "\U0010FFFF", 0xDBFF*31 + 0xDFFF},
		{"NUL", "a\x00b", (97*31+0)*31 + 98},
		{"invalid byte", "\xff", 0xFFFD},
		{"truncated 3-byte prefix counts once", "\xe6\x97A", 0xFFFD*31 + 'A'},
		{"overlong 2-byte", "\xc0\x80", 0xFFFD*31 + 0xFFFD},
		{"encoded surrogate is one U+FFFD", "\xed\xa0\x80", 0xFFFD},
		{"truncated 4-byte prefix counts once", "\xf0\x9f\x98A", 0xFFFD*31 + 'A'},
		{"above U+10FFFF", "\xf4\x90\x80\x80", javaHashOfUnits([]uint16{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD})},
	}
	for _, c := range cases {
		if got := JavaStringHashCode(c.s); got != c.want {
			t.Errorf("%s: JavaStringHashCode(%q) = %d, want %d", c.name, c.s, got, c.want)
		}
	}
	// Valid UTF-8 hashes its UTF-16 encoding.
	for _, s := range []string{"日本語のグループ", "Ünïcödé", "emoji-👍-🚀", "ascii only"} {
		if got, want := JavaStringHashCode(s), javaHashOfUnits(utf16.Encode([]rune(s))); got != want {
			t.Errorf("JavaStringHashCode(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestPartitionFor(t *testing.T) {
	for _, s := range []string{"polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES"} {
		for _, n := range []int32{1, 3, 16, 50, math.MaxInt32} {
			if got := PartitionFor(s, n); got != 0 {
				t.Errorf("PartitionFor(%q, %d) = %d, want 0 (hash is Integer.MIN_VALUE)", s, n, got)
			}
		}
	}
	// Negative hashes use the absolute value.
	if h := JavaStringHashCode("test-001"); h != -1148003722 {
		t.Fatalf("hash = %d", h)
	}
	if got := PartitionFor("test-001", 50); got != 1148003722%50 {
		t.Errorf("PartitionFor(test-001, 50) = %d", got)
	}
	if got := javaAbs(math.MinInt32 + 1); got != math.MaxInt32 {
		t.Errorf("javaAbs(MinInt32+1) = %d", got)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("PartitionFor(_, 0) did not panic")
			}
		}()
		PartitionFor("x", 0)
	}()
}

func FuzzJavaStringHashCodeValidUTF8(f *testing.F) {
	f.Add("group")
	f.Add("日本😀")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got, want := JavaStringHashCode(s), javaHashOfUnits(utf16.Encode([]rune(s))); got != want {
			t.Errorf("JavaStringHashCode(%q) = %d, want %d", s, got, want)
		}
	})
}
