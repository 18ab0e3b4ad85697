package main

import "testing"

func TestProcsFollowTheLoad(t *testing.T) {
	const base = 2
	for _, c := range []struct {
		name        string
		current     int
		share       float64
		quiet, want int
	}{
		{"a quiet process keeps the default", base, 0.05, 10, base},
		{"load adds the extra Ps", base, 0.6, 0, base + extraProcs},
		{"load at the threshold adds them", base, busyShare, 0, base + extraProcs},
		{"a busy process keeps them", base + extraProcs, 0.9, 0, base + extraProcs},
		{"between the thresholds nothing changes", base + extraProcs, 0.2, 0, base + extraProcs},
		{"a short lull keeps them", base + extraProcs, 0.01, procsQuietTicks - 1, base + extraProcs},
		{"a long lull takes them away", base + extraProcs, 0.01, procsQuietTicks, base},
	} {
		if got := procsFor(base, c.current, c.share, c.quiet); got != c.want {
			t.Errorf("%s: procsFor(%d, %d, %v, %d) = %d, want %d", c.name, base, c.current, c.share, c.quiet, got, c.want)
		}
	}
}
