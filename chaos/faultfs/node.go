package faultfs

import (
	"context"
	"io"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var errEOF = io.EOF

// node is a loopback inode whose writes, syncs and namespace changes pass
// the file system's faults first.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
	_ fs.NodeMknoder     = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRmdirer     = (*node)(nil)
	_ fs.NodeSymlinker   = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
)

// WrapChild makes every inode the loopback creates one of ours.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fsys: n.fsys}
}

// Open opens the backing file, unbuffered by the kernel (see the package
// doc).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &handle{LoopbackFile: fh.(*fs.LoopbackFile), n: n}, fuseFlags | fuse.FOPEN_DIRECT_IO, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.beforeWrite(ctx); errno != 0 {
		return nil, nil, 0, errno
	}
	inode, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child := inode.Operations().(*node)
	return inode, &handle{LoopbackFile: fh.(*fs.LoopbackFile), n: child}, fuseFlags | fuse.FOPEN_DIRECT_IO, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fsys.beforeWrite(ctx); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fsys.beforeWrite(ctx); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if errno := n.fsys.waitStall(ctx); errno != 0 {
		return errno
	}
	if p, ok := newParent.(*node); ok {
		newParent = p.LoopbackNode
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if errno := n.fsys.waitStall(ctx); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if errno := n.fsys.waitStall(ctx); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fsys.beforeWrite(ctx); errno != 0 {
		return nil, errno
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.fsys.beforeWrite(ctx); errno != 0 {
		return nil, errno
	}
	if t, ok := target.(*node); ok {
		target = t.LoopbackNode
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

// Setattr passes a truncation through the handle when there is one (which
// records it for PowerLoss); a truncation by path is not undone.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); ok {
		if errno := n.fsys.beforeWrite(ctx); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// Fsync of a directory (an fsync of a file comes to its handle): the
// namespace is kept anyway, so it only passes the faults.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	return n.fsys.beforeSync(ctx)
}

// handle is an open file: the loopback's, with writes recorded for
// PowerLoss and writes and syncs passing the faults.
type handle struct {
	*fs.LoopbackFile
	n *node
}

// PassthroughFd refuses FUSE passthrough, which would let the kernel
// write to the backing file without asking.
func (h *handle) PassthroughFd() (int, bool) { return -1, false }

// fd is the handle's backing file descriptor (valid while the handle is).
func (h *handle) fd() (fd int, errno syscall.Errno) {
	fd, ok := h.LoopbackFile.PassthroughFd()
	if !ok {
		return -1, syscall.EBADF
	}
	return fd, 0
}

// remember records what a write of size bytes at off overwrites.
func (h *handle) remember(off int64, size int) syscall.Errno {
	fd, errno := h.fd()
	if errno != 0 {
		return errno
	}
	u, err := h.n.fsys.undo(h.n, fd)
	if err == nil {
		err = u.record(off, size)
	}
	return fs.ToErrno(err)
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := h.n.fsys.beforeWrite(ctx); errno != 0 {
		return 0, errno
	}
	if errno := h.remember(off, len(data)); errno != 0 {
		return 0, errno
	}
	return h.LoopbackFile.Write(ctx, data, off)
}

func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	size := 0
	for _, d := range data {
		size += len(d)
	}
	buf := make([]byte, 0, size)
	for _, d := range data {
		buf = append(buf, d...)
	}
	return h.Write(ctx, buf, off)
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if errno := h.n.fsys.beforeWrite(ctx); errno != 0 {
		return errno
	}
	if errno := h.remember(int64(off), int(size)); errno != 0 {
		return errno
	}
	return h.LoopbackFile.Allocate(ctx, off, size, mode)
}

// Setattr records a truncation's cut tail before it truncates.
func (h *handle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if errno := h.n.fsys.beforeWrite(ctx); errno != 0 {
			return errno
		}
		fd, errno := h.fd()
		if errno != 0 {
			return errno
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return fs.ToErrno(err)
		}
		if int64(size) < st.Size {
			if errno := h.remember(int64(size), int(st.Size-int64(size))); errno != 0 {
				return errno
			}
		}
	}
	return h.LoopbackFile.Setattr(ctx, in, out)
}

// Fsync passes the faults, syncs, and drops the inode's undo log: what
// it covered is durable now.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if errno := h.n.fsys.beforeSync(ctx); errno != 0 {
		return errno
	}
	if errno := h.LoopbackFile.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	h.n.fsys.synced(h.n)
	return 0
}
