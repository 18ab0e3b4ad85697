package assignbench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunSmallCases compares the contenders on small versions of the cases:
// both plans must be as even and as sticky as each other.
func TestRunSmallCases(t *testing.T) {
	cases := []Case{
		fresh(5, 20, 4, false),
		fresh(5, 20, 4, true),
		rebalanced(5, 20, 10, func(i int) bool { return i%10 != 9 }, 0),
		rebalanced(5, 20, 10, func(int) bool { return true }, 3),
	}
	var results []Result
	for i := range cases {
		cases[i].Name = "small"
		r, err := Run(&cases[i], Contenders(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if r[0].Quality != r[1].Quality {
			t.Errorf("case %d: kcoord %+v, franz-go %+v", i, r[0].Quality, r[1].Quality)
		}
		results = append(results, r...)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, results); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(buf.String(), "\n"); lines != 1+len(results) || !strings.Contains(buf.String(), "speedup") {
		t.Errorf("table:\n%s", buf.String())
	}
	if _, err := Cases("nope"); err == nil {
		t.Error("no error for an unknown case")
	}
}
