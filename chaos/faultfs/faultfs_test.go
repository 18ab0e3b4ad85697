package faultfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mount mounts a fault file system over a temp dir, or skips the test
// where FUSE cannot be mounted (not root, no /dev/fuse).
func mount(t *testing.T) *FS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("faultfs: mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("faultfs: no /dev/fuse: %v", err)
	}
	dir := t.TempDir()
	f, err := Mount(filepath.Join(dir, "disk"), filepath.Join(dir, "mnt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func writeAt(t *testing.T, fd *os.File, b string, off int64) {
	t.Helper()
	if _, err := fd.WriteAt([]byte(b), off); err != nil {
		t.Fatal(err)
	}
}

func wantContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), got, want)
	}
}

// TestPowerLossKeepsOnlyWhatWasSynced: what a file held at its last fsync
// survives a power loss, overwrites and appends since are undone, and a
// file never synced is empty (its name stays, as LazyFS keeps names).
func TestPowerLossKeepsOnlyWhatWasSynced(t *testing.T) {
	f := mount(t)
	synced := filepath.Join(f.Mountpoint(), "synced")
	fd, err := os.Create(synced)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, fd, "hello world", 0)
	if err := fd.Sync(); err != nil {
		t.Fatal(err)
	}
	writeAt(t, fd, "HELLO", 0)
	writeAt(t, fd, " and more", 11)
	if err := fd.Truncate(20); err != nil {
		t.Fatal(err)
	}
	fd.Close()
	wantContent(t, synced, "HELLO world and more")

	never := filepath.Join(f.Mountpoint(), "never")
	if err := os.WriteFile(never, []byte("lost"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, n, err := f.PowerLoss()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("power loss reverted %d files, %d bytes", files, n)
	wantContent(t, synced, "hello world")
	wantContent(t, never, "")
	if files, _, _ := f.PowerLoss(); files != 0 {
		t.Fatalf("a second power loss reverted %d files; nothing was written since", files)
	}
}

// TestStallBlocksWritesAndSyncsUntilResumed: during a stall a write
// parks while a read still answers, and both the write and its fsync
// complete once the disk answers again.
func TestStallBlocksWritesAndSyncsUntilResumed(t *testing.T) {
	f := mount(t)
	path := filepath.Join(f.Mountpoint(), "f")
	if err := os.WriteFile(path, []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	resume := f.Stall()
	done := make(chan error, 1)
	go func() {
		if _, err := fd.WriteAt([]byte("after!"), 0); err != nil {
			done <- err
			return
		}
		done <- fd.Sync()
	}()
	select {
	case err := <-done:
		t.Fatalf("a write returned during a stall: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	wantContent(t, path, "before") // reads answer
	resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantContent(t, path, "after!")
}

// TestFailedSyncsAndFullDisk: fsync answers EIO and writes ENOSPC until
// healed.
func TestFailedSyncsAndFullDisk(t *testing.T) {
	f := mount(t)
	fd, err := os.Create(filepath.Join(f.Mountpoint(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	writeAt(t, fd, "x", 0)
	f.FailSyncs()
	if err := fd.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync on a failing disk: %v, want EIO", err)
	}
	f.Heal()
	if err := fd.Sync(); err != nil {
		t.Fatalf("fsync after healing: %v", err)
	}
	f.Full()
	if _, err := fd.WriteAt([]byte("y"), 1); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v, want ENOSPC", err)
	}
	if _, err := os.Create(filepath.Join(f.Mountpoint(), "g")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on a full disk: %v, want ENOSPC", err)
	}
	f.Heal()
	writeAt(t, fd, "y", 1)
}
