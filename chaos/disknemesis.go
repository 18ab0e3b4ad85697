package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/kcoord/kcoord/chaos/faultfs"
)

// The disk nemeses act on the fault file system each node's data dir is
// mounted on (faultfs): the processes keep running, with their sockets
// open, while their disk misbehaves under them.

// FaultFSSupported says whether this machine can mount the nodes' fault
// file systems: FUSE needs root here and /dev/fuse.
func FaultFSSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("chaos: the disk nemeses mount FUSE file systems, which needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("chaos: the disk nemeses need FUSE: %w", err)
	}
	return nil
}

// diskNemesis says whether a nemesis needs the fault file systems.
func diskNemesis(name string) bool { return strings.HasPrefix(name, "disk-") || name == "power-loss" }

// diskSlowSync is what the slow-disk nemesis adds to every fsync: far
// slower than a healthy disk, below kcoord.log.max.sync.ms, so the node
// is slow, not fenced.
const diskSlowSync = 400 * time.Millisecond

// diskStall blocks every write and fsync of a node's disk for the hold;
// the node must fence itself and come back by itself once it answers.
func diskStall(wantLeader bool) func(context.Context, *Cluster, int) (string, func(context.Context) error, error) {
	return func(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
		i := pick(c, leader, wantLeader)
		d, err := c.Disk(i)
		if err != nil {
			return nodeName(i), nil, err
		}
		resume := d.Stall()
		return nodeName(i), func(ctx context.Context) error {
			resume()
			return c.WaitReady(ctx, i, 60*time.Second)
		}, nil
	}
}

// diskSlow makes every fsync of the leader's disk diskSlowSync slower.
func diskSlow(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
	d, err := c.Disk(leader)
	if err != nil {
		return nodeName(leader), nil, err
	}
	d.SlowSyncs(diskSlowSync)
	return nodeName(leader), func(context.Context) error { d.Heal(); return nil }, nil
}

// diskFail makes the leader's disk fail (fsync EIO, or ENOSPC on every
// write) for the hold. The node fences itself for good; the heal is the
// operator's recovery: a working disk and a restart on the same data.
func diskFail(fail func(*faultfs.FS)) func(context.Context, *Cluster, int) (string, func(context.Context) error, error) {
	return func(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
		d, err := c.Disk(leader)
		if err != nil {
			return nodeName(leader), nil, err
		}
		fail(d)
		return nodeName(leader), func(ctx context.Context) error {
			d.Heal()
			if err := c.Signal(leader, syscall.SIGKILL); err != nil {
				return err
			}
			return c.Restart(ctx, leader)
		}, nil
	}
}

// powerLoss cuts the power of every node at once: the processes die
// (SIGKILL) and every write not yet fsynced is undone on every disk, then
// they all start again on what their disks kept.
func powerLoss(ctx context.Context, c *Cluster, _ int) (string, func(context.Context) error, error) {
	var disks []*faultfs.FS
	for i := 1; i <= c.Nodes(); i++ {
		d, err := c.Disk(i)
		if err != nil {
			return "all", nil, err
		}
		disks = append(disks, d)
	}
	for i := 1; i <= c.Nodes(); i++ {
		if err := c.Signal(i, syscall.SIGKILL); err != nil {
			return "all", nil, err
		}
	}
	var errs []error
	files, lost := 0, int64(0)
	for i, d := range disks {
		f, n, err := d.PowerLoss()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: power loss: %w", i+1, err))
		}
		files, lost = files+f, lost+n
	}
	c.cfg.Logger.Info("power lost", "files_reverted", files, "bytes_reverted", lost)
	heal := func(ctx context.Context) error {
		for i := 1; i <= c.Nodes(); i++ {
			if err := c.launch(i); err != nil {
				return err
			}
		}
		return c.WaitAllReady(ctx, c.cfg.ReadyBound)
	}
	return "all", heal, errors.Join(errs...)
}
