package faultfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is one mounted fault file system.
type FS struct {
	backing, mountpoint string
	server              *fuse.Server

	mu      sync.Mutex
	stalled chan struct{} // closed when the stall ends; nil: none
	delay   time.Duration // added to every fsync
	syncErr syscall.Errno // answered by fsync instead of syncing; 0: none
	full    bool          // writes and creates answer ENOSPC

	// dirty are the inodes written since their last fsync, with their
	// undo logs (PowerLoss).
	dirtyMu sync.Mutex
	dirty   map[*node]*undoLog
}

// Mount serves backing (a directory, created if missing) at mountpoint
// (created if missing) until Unmount. It needs root, or fusermount, and
// /dev/fuse.
func Mount(backing, mountpoint string) (*FS, error) {
	for _, d := range []string{backing, mountpoint} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("faultfs: %w", err)
		}
	}
	f := &FS{backing: backing, mountpoint: mountpoint, dirty: map[*node]*undoLog{}}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	loop := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: loop}, fsys: f}
	loop.RootNode = root
	zero := time.Duration(0)
	server, err := fs.Mount(mountpoint, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:      "faultfs:" + backing,
			Name:        "faultfs",
			DirectMount: os.Geteuid() == 0,
			// Many of the node's goroutines write at once.
			MaxBackground: 64,
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
	})
	if err != nil {
		return nil, fmt.Errorf("faultfs: mount %s: %w", mountpoint, err)
	}
	f.server = server
	if err := closeFuseOnExec(); err != nil {
		_ = f.Unmount()
		return nil, err
	}
	return f, nil
}

// closeFuseOnExec marks every /dev/fuse descriptor of this process
// close-on-exec. go-fuse's direct mount opens the device without it, so
// every process started afterwards (the chaos suite's nodes) would hold
// the connection of every mount made before it: an unmount then waits for
// them all to exit, and a node could keep its own disk's server alive.
func closeFuseOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("faultfs: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
				return fmt.Errorf("faultfs: close-on-exec of /dev/fuse: %w", err)
			}
		}
	}
	return nil
}

// Mountpoint is where the file system is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Unmount ends every fault (a stalled request must return for the kernel
// to let go) and unmounts, lazily if a process still holds a file.
func (f *FS) Unmount() error {
	f.Heal()
	if err := f.server.Unmount(); err != nil {
		if lazy := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); lazy != nil {
			return fmt.Errorf("faultfs: unmount %s: %w (lazy: %v)", f.mountpoint, err, lazy)
		}
	}
	f.server.Wait()
	return nil
}

// Stall blocks every write, fsync and namespace change until resume is
// called (idempotent).
func (f *FS) Stall() (resume func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stalled == nil {
		f.stalled = make(chan struct{})
	}
	ch := f.stalled
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.stalled == ch {
				f.stalled = nil
			}
			f.mu.Unlock()
			close(ch)
		})
	}
}

// SlowSyncs adds d to every fsync until Heal.
func (f *FS) SlowSyncs(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// FailSyncs makes every fsync answer EIO, without syncing, until Heal.
func (f *FS) FailSyncs() {
	f.mu.Lock()
	f.syncErr = syscall.EIO
	f.mu.Unlock()
}

// Full makes every write, fallocate and create answer ENOSPC until Heal.
func (f *FS) Full() {
	f.mu.Lock()
	f.full = true
	f.mu.Unlock()
}

// Heal ends every fault: a stall resumes, fsyncs and writes work again.
func (f *FS) Heal() {
	f.mu.Lock()
	ch := f.stalled
	f.stalled, f.delay, f.syncErr, f.full = nil, 0, 0, false
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// PowerLoss undoes every write not fsynced since (see the package doc)
// and reports how many files and bytes it reverted. Call it only once
// every process writing through the mount is dead: a write in flight
// meanwhile may survive it.
func (f *FS) PowerLoss() (files int, bytes int64, err error) {
	f.dirtyMu.Lock()
	dirty := f.dirty
	f.dirty = map[*node]*undoLog{}
	f.dirtyMu.Unlock()
	var errs []error
	for _, u := range dirty {
		n, err := u.revert()
		if err != nil {
			errs = append(errs, err)
		}
		files++
		bytes += n
	}
	return files, bytes, errors.Join(errs...)
}

// waitStall parks the caller while the file system stalls (or until ctx,
// the kernel's interrupt of the request, ends).
func (f *FS) waitStall(ctx context.Context) syscall.Errno {
	f.mu.Lock()
	ch := f.stalled
	f.mu.Unlock()
	if ch == nil {
		return 0
	}
	select {
	case <-ch:
		return 0
	case <-ctx.Done():
		return syscall.EINTR
	}
}

// beforeWrite gates a write or a namespace change.
func (f *FS) beforeWrite(ctx context.Context) syscall.Errno {
	if errno := f.waitStall(ctx); errno != 0 {
		return errno
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return syscall.ENOSPC
	}
	return 0
}

// beforeSync gates an fsync: a stall, then the delay, then the error.
func (f *FS) beforeSync(ctx context.Context) syscall.Errno {
	if errno := f.waitStall(ctx); errno != 0 {
		return errno
	}
	f.mu.Lock()
	delay, errno := f.delay, f.syncErr
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return syscall.EINTR
		}
	}
	return errno
}

// undo returns n's undo log, starting one when n has none: with the
// inode opened afresh for reading and writing (the handle may be
// write-only, and the log outlives it), and the size it has now, its size
// at its last fsync.
func (f *FS) undo(n *node, fd int) (*undoLog, error) {
	f.dirtyMu.Lock()
	defer f.dirtyMu.Unlock()
	if u, ok := f.dirty[n]; ok {
		return u, nil
	}
	// Reopening through /proc names the inode, whatever its path is now.
	file, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	u := &undoLog{f: file, syncedSize: st.Size()}
	f.dirty[n] = u
	return u, nil
}

// synced drops n's undo log: what it covered is durable.
func (f *FS) synced(n *node) {
	f.dirtyMu.Lock()
	u := f.dirty[n]
	delete(f.dirty, n)
	f.dirtyMu.Unlock()
	if u != nil {
		_ = u.f.Close()
	}
}

// undoLog is what the writes to one inode since its last fsync overwrote.
type undoLog struct {
	f          *os.File // the inode, held open until the log is applied or dropped
	syncedSize int64    // its size at its last fsync
	mu         sync.Mutex
	recs       []undoRec
}

type undoRec struct {
	off int64
	old []byte // what was there (only the part before the end of the file)
}

// record saves what a write of n bytes at off is about to overwrite.
func (u *undoLog) record(off int64, n int) error {
	old := make([]byte, n)
	got, err := u.f.ReadAt(old, off)
	if err != nil && !errors.Is(err, errEOF) {
		return err
	}
	u.mu.Lock()
	u.recs = append(u.recs, undoRec{off: off, old: old[:got]})
	u.mu.Unlock()
	return nil
}

// revert applies the log backwards and cuts the file back to its synced
// size; it returns the bytes it rewrote or cut.
func (u *undoLog) revert() (int64, error) {
	defer u.f.Close()
	u.mu.Lock()
	defer u.mu.Unlock()
	var n int64
	for i := len(u.recs) - 1; i >= 0; i-- {
		r := u.recs[i]
		if len(r.old) > 0 {
			if _, err := u.f.WriteAt(r.old, r.off); err != nil {
				return n, err
			}
			n += int64(len(r.old))
		}
	}
	st, err := u.f.Stat()
	if err != nil {
		return n, err
	}
	if st.Size() > u.syncedSize {
		n += st.Size() - u.syncedSize
		if err := u.f.Truncate(u.syncedSize); err != nil {
			return n, err
		}
	}
	return n, u.f.Sync()
}
