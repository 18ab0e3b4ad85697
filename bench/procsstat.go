package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: clock ticks of
// USER_HZ, which the kernel fixes at 100 on every architecture Go builds
// kcoord for.
const userHZ = 100

// ErrProcStat means /proc did not give a process's CPU time or memory.
var ErrProcStat = errors.New("bench: unreadable /proc entry")

// ProcCPU is the user and system CPU time process pid has used
// (utime+stime of /proc/<pid>/stat), to 1/userHZ s.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses itself: the fields that follow start after the
	// last ')'. utime and stime are fields 14 and 15.
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("%w: /proc/%d/stat: no command name", ErrProcStat, pid)
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: /proc/%d/stat: %d fields", ErrProcStat, pid, len(f)+2)
	}
	var ticks int64
	for _, field := range f[11:13] {
		v, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: /proc/%d/stat: %v", ErrProcStat, pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// ResidentMB is process pid's resident memory (VmRSS of
// /proc/<pid>/status), in MiB.
func ResidentMB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("%w: /proc/%d/status: VmRSS: %v", ErrProcStat, pid, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("%w: /proc/%d/status: no VmRSS", ErrProcStat, pid)
}

// procsIdleCPU is the CPU time the nodes' processes use together over d,
// as a percentage of one core, after the settle idleCPU waits too. It
// fails if a process exits meanwhile.
func procsIdleCPU(ctx context.Context, p *Procs, d time.Duration) (float64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(idleSettle):
	}
	var pids []int
	for i := 1; i <= p.Nodes(); i++ {
		pid, err := p.Pid(i)
		if err != nil {
			return 0, err
		}
		pids = append(pids, pid)
	}
	// A process that exits meanwhile has no /proc entry at the end (Procs
	// reaps it): the second sum fails rather than count a restarted one.
	sum := func() (time.Duration, error) {
		var total time.Duration
		for _, pid := range pids {
			cpu, err := ProcCPU(pid)
			if err != nil {
				return 0, err
			}
			total += cpu
		}
		return total, nil
	}
	before, err := sum()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	after, err := sum()
	if err != nil {
		return 0, errors.Join(err, p.CheckRunning())
	}
	return 100 * (after - before).Seconds() / time.Since(t0).Seconds(), nil
}
