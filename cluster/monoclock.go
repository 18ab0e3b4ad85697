package cluster

import "time"

// monoOrigin is a reading of the monotonic clock taken when the process
// started. A time kept as an offset from it (monoOffset) fits an atomic
// integer and, unlike Unix nanoseconds, moves with no step of the wall
// clock.
var monoOrigin = time.Now()

// monoOffset is t as nanoseconds after monoOrigin.
func monoOffset(t time.Time) int64 { return int64(t.Sub(monoOrigin)) }

// monoTime is the time monoOffset made offset of.
func monoTime(offset int64) time.Time { return monoOrigin.Add(time.Duration(offset)) }
