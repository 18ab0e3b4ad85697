package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
)

// kcoord runs with more Ps (GOMAXPROCS) than CPUs while it is busy, and
// with the runtime's default (the CPUs it may use: the CPU count or the
// container's limit) while it is quiet.
//
// The reason is the write-ahead log. A node's log commits with one write(2)
// and one fdatasync from one goroutine (nodestore's committer), and
// fdatasync also costs the kernel CPU time. With as many Ps as CPUs, under
// 64 committing clients on 2 CPUs, goroutines waited to run 4.2 ms at p90
// and 14.7 ms at p99 (three in-process nodes), group commits held 1.4
// writes, and the disk flushed nearly once per write. Two more Ps cut that
// wait to 1.3 ms and let batches grow to 5.7 writes. Idle, though, the
// extra Ps cost: the runtime wakes more threads to look for work, and three
// idle nodes used 14.5% of one core at 4 Ps against 11% at 2. So the extra
// Ps are there only while the process uses a good share of its CPUs.
const (
	// extraProcs is how many Ps beyond the default a busy process runs.
	// Two: a deployed node has one committer, and the second covers
	// another blocking call (a snapshot's or a segment rotation's fsync).
	// Measured with `kcoord bench report` on 2 CPUs (commits/s, 64 clients,
	// as × kfake in the same run): one node 0.39× at 2 Ps, 0.52× at 4,
	// 0.37× at 8; three nodes 0.06×, 0.18×, 0.12×.
	extraProcs = 2
	// busyShare and quietShare are the process's CPU use, as a share of the
	// default Ps' CPUs over one procsTick, above which it is busy and
	// below which it is quiet (for procsQuietTicks in a row before the
	// extra Ps go). Three idle nodes in one process use about 5% of 2 CPUs.
	busyShare, quietShare = 0.25, 0.125
	procsTick             = time.Second
	procsQuietTicks       = 3
)

// procsBase is the runtime's default GOMAXPROCS, read before adaptProcs
// changes it.
var procsBase = runtime.GOMAXPROCS(0)

// procsFor returns the Ps a process with base default Ps should run, now
// running current, after it used share of base CPUs over the last tick and
// had been quiet for quiet ticks before it (this one included).
func procsFor(base, current int, share float64, quiet int) int {
	switch {
	case share >= busyShare:
		return base + extraProcs
	case quiet >= procsQuietTicks:
		return base
	default:
		return current
	}
}

// adaptProcs adjusts GOMAXPROCS to the process's load every procsTick,
// unless the GOMAXPROCS environment variable chose it. main starts it on
// a goroutine of its own; it runs for the process's life. Its base is the
// default at start: once it has set GOMAXPROCS, the runtime no longer
// follows a container CPU limit that changes later (restart to pick one
// up).
func adaptProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	base := procsBase
	lastCPU, lastAt := processCPU(), time.Now()
	quiet := 0
	for range time.Tick(procsTick) {
		cpu, at := processCPU(), time.Now()
		share := (cpu - lastCPU).Seconds() / at.Sub(lastAt).Seconds() / float64(base)
		lastCPU, lastAt = cpu, at
		if share < quietShare {
			quiet++
		} else {
			quiet = 0
		}
		current := runtime.GOMAXPROCS(0)
		if n := procsFor(base, current, share, quiet); n != current {
			runtime.GOMAXPROCS(n)
		}
	}
}

// procsPolicy describes what adaptProcs does in this process, for reports.
func procsPolicy() string {
	if os.Getenv("GOMAXPROCS") != "" {
		return fmt.Sprintf("GOMAXPROCS %d, from the environment", runtime.GOMAXPROCS(0))
	}
	return fmt.Sprintf("GOMAXPROCS %d, %d while busy", procsBase, procsBase+extraProcs)
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
