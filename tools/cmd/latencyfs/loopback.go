package main

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is go-fuse's loopback node with files opened for direct I/O and
// POSIX lock semantics (see lockTable). Everything else is the loopback's.
type node struct {
	*fs.LoopbackNode
	locks *lockTable
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
)

// newRoot returns the root of a loopback view of dir.
func newRoot(dir string, locks *lockTable) (*node, error) {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return nil, err
	}
	return &node{LoopbackNode: root.(*fs.LoopbackNode), locks: locks}, nil
}

// WrapChild makes every node below the root a node too.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), locks: n.locks}
}

// Open opens the backing file and asks the kernel for direct I/O: no page
// cache, so every read(2) and write(2) reaches the file system.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	f, errno := n.newFile(fh)
	if errno != 0 {
		return nil, 0, errno
	}
	return f, fuseFlags | fuse.FOPEN_DIRECT_IO, 0
}

// Create creates and opens the backing file, for direct I/O as Open.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	f, errno := n.newFile(fh)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, f, fuseFlags | fuse.FOPEN_DIRECT_IO, 0
}

// newFile wraps the loopback's handle.
func (n *node) newFile(fh fs.FileHandle) (*file, syscall.Errno) {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd() // the descriptor itself; it lives until Release
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	f := &file{lf: lf, fd: fd, id: fileID{uint64(st.Dev), st.Ino}, locks: n.locks}
	n.locks.opened(f.id)
	return f, 0
}

// file is an open file: go-fuse's loopback file, forwarded to method by
// method, with this package's locking. It holds the loopback file instead
// of embedding it so that it does not offer PassthroughFd: a file that does
// would let go-fuse hand its descriptor to the kernel (FUSE passthrough, as
// root on Linux 6.9 and later), and reads and writes would then bypass this
// file system and its latency entirely.
type file struct {
	lf    *fs.LoopbackFile
	fd    int // lf's descriptor
	id    fileID
	locks *lockTable
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileWritever  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileStatxer   = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, dest, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return f.lf.Write(ctx, data, off)
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	return f.lf.Writev(ctx, data, off)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Setattr(ctx, in, out)
}

func (f *file) Statx(ctx context.Context, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return f.lf.Statx(ctx, flags, mask, out)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return f.lf.Fsync(ctx, flags)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}

// Flush is a close(2) of one descriptor of the file. As on a local file, it
// releases every POSIX lock the closing process holds on the file.
func (f *file) Flush(ctx context.Context) syscall.Errno {
	if owner, ok := f.locks.flushOwner(ctx); ok {
		f.locks.dropOwner(f.id, owner)
	}
	return f.lf.Flush(ctx)
}

// Release closes the handle after the last descriptor that shared it is
// closed; the handle's flock(2) locks go with it.
func (f *file) Release(ctx context.Context) syscall.Errno {
	errno := f.lf.Release(ctx)
	f.locks.released(f.id)
	return errno
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		return syscall.ENOTSUP // flock(2) has no test operation
	}
	return f.locks.getlk(f.id, f.fd, owner, lk, out)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.setlk(ctx, owner, lk, flags, false)
}

func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.setlk(ctx, owner, lk, flags, true)
}

func (f *file) setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		return flock(ctx, f.fd, lk, wait)
	}
	return f.locks.setlk(ctx, f.id, f.fd, owner, lk, wait)
}
