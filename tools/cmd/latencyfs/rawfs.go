package main

import (
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// rawFS counts and delays every request the kernel sends, then hands it to
// the loopback beneath. It sits at the raw protocol level, below go-fuse's
// node layer, so that what it counts is exactly what crossed /dev/fuse: the
// round trips an uncached network file system would make.
//
// The delay is a sleep in the goroutine that serves the request, before it
// is served; go-fuse serves each request in its own goroutine, so a
// sleeping op holds up only its caller, as a round trip would.
type rawFS struct {
	fuse.RawFileSystem

	lat   latency
	stats *stats
	locks *lockTable // told each FLUSH's lock owner
}

// newRawFS wraps inner, delaying ops by lat and counting them in s.
func newRawFS(inner fuse.RawFileSystem, lat latency, s *stats, locks *lockTable) *rawFS {
	return &rawFS{RawFileSystem: inner, lat: lat, stats: s, locks: locks}
}

// op counts o and sleeps for its class's latency.
func (r *rawFS) op(o op) {
	d := r.lat.of(o)
	if d <= 0 {
		r.stats.add(o, 0)
		return
	}
	start := time.Now()
	sleep(d)
	r.stats.add(o, time.Since(start))
}

// prSetTimerslack is prctl(2)'s PR_SET_TIMERSLACK.
const prSetTimerslack = 29

// sleep blocks the calling thread for d, as precisely as the host allows.
// It does not use time.Sleep: when a Go process is idle, its timers fire
// from epoll_wait, whose timeout is in whole milliseconds, so
// time.Sleep(250µs) lasts about 1.1 ms, four times EFS's read latency.
// nanosleep(2) with the thread's timer slack cut from 50 µs to 1 ns
// overshoots by tens of microseconds instead. The cost is an OS thread per
// sleeping op, which the Go runtime provides (a blocked system call gives
// up its processor to other goroutines).
func sleep(d time.Duration) {
	syscall.Syscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// lockOp is the counted kind of a SETLK or SETLKW request.
func lockOp(in *fuse.LkIn, wait bool) op {
	switch {
	case in.Lk.Typ == syscall.F_UNLCK:
		return opUnlock
	case wait:
		return opSetlkw
	}
	return opSetlk
}

func (r *rawFS) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	r.op(opLookup)
	return r.RawFileSystem.Lookup(c, h, name, out)
}

func (r *rawFS) Forget(nodeid, nlookup uint64) {
	r.op(opForget)
	r.RawFileSystem.Forget(nodeid, nlookup)
}

func (r *rawFS) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	r.op(opGetattr)
	return r.RawFileSystem.GetAttr(c, in, out)
}

func (r *rawFS) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	r.op(opStatx)
	return r.RawFileSystem.Statx(c, in, out)
}

func (r *rawFS) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	r.op(opSetattr)
	return r.RawFileSystem.SetAttr(c, in, out)
}

func (r *rawFS) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	r.op(opMknod)
	return r.RawFileSystem.Mknod(c, in, name, out)
}

func (r *rawFS) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	r.op(opMkdir)
	return r.RawFileSystem.Mkdir(c, in, name, out)
}

func (r *rawFS) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	r.op(opUnlink)
	return r.RawFileSystem.Unlink(c, h, name)
}

func (r *rawFS) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	r.op(opRmdir)
	return r.RawFileSystem.Rmdir(c, h, name)
}

func (r *rawFS) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	r.op(opRename)
	return r.RawFileSystem.Rename(c, in, oldName, newName)
}

func (r *rawFS) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	r.op(opLink)
	return r.RawFileSystem.Link(c, in, name, out)
}

func (r *rawFS) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	r.op(opSymlink)
	return r.RawFileSystem.Symlink(c, h, target, name, out)
}

func (r *rawFS) Readlink(c <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	r.op(opReadlink)
	return r.RawFileSystem.Readlink(c, h)
}

func (r *rawFS) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	r.op(opAccess)
	return r.RawFileSystem.Access(c, in)
}

func (r *rawFS) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	r.op(opGetxattr)
	return r.RawFileSystem.GetXAttr(c, h, attr, dest)
}

func (r *rawFS) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	r.op(opListxattr)
	return r.RawFileSystem.ListXAttr(c, h, dest)
}

func (r *rawFS) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	r.op(opSetxattr)
	return r.RawFileSystem.SetXAttr(c, in, attr, data)
}

func (r *rawFS) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	r.op(opRemovexattr)
	return r.RawFileSystem.RemoveXAttr(c, h, attr)
}

func (r *rawFS) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	r.op(opCreate)
	return r.RawFileSystem.Create(c, in, name, out)
}

func (r *rawFS) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	r.op(opTmpfile)
	return r.RawFileSystem.Tmpfile(c, in, out)
}

func (r *rawFS) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	r.op(opOpen)
	return r.RawFileSystem.Open(c, in, out)
}

func (r *rawFS) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	r.op(opRead)
	return r.RawFileSystem.Read(c, in, buf)
}

func (r *rawFS) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	r.op(opLseek)
	return r.RawFileSystem.Lseek(c, in, out)
}

func (r *rawFS) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	r.op(opGetlk)
	return r.RawFileSystem.GetLk(c, in, out)
}

func (r *rawFS) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	r.op(lockOp(in, false))
	return r.RawFileSystem.SetLk(c, in)
}

func (r *rawFS) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	r.op(lockOp(in, true))
	return r.RawFileSystem.SetLkw(c, in)
}

func (r *rawFS) Release(c <-chan struct{}, in *fuse.ReleaseIn) {
	r.op(opRelease)
	r.RawFileSystem.Release(c, in)
}

// Write is counted here only for completeness: go-fuse calls Writev for
// every WRITE and falls back to Write only when Writev says ENOSYS, which the
// loopback file never does, so no write is counted twice.
func (r *rawFS) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	r.op(opWrite)
	return r.RawFileSystem.Write(c, in, data)
}

func (r *rawFS) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	r.op(opWrite)
	return r.RawFileSystem.Writev(c, in, data)
}

func (r *rawFS) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	r.op(opCopyFileRange)
	return r.RawFileSystem.CopyFileRange(c, in)
}

func (r *rawFS) Ioctl(c <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	r.op(opIoctl)
	return r.RawFileSystem.Ioctl(c, in, inbuf, out, outbuf)
}

func (r *rawFS) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	r.op(opFlush)
	r.locks.flushOwners.Store(c, in.LockOwner)
	defer r.locks.flushOwners.Delete(c)
	return r.RawFileSystem.Flush(c, in)
}

func (r *rawFS) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	r.op(opFsync)
	return r.RawFileSystem.Fsync(c, in)
}

func (r *rawFS) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	r.op(opFallocate)
	return r.RawFileSystem.Fallocate(c, in)
}

func (r *rawFS) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	r.op(opOpendir)
	return r.RawFileSystem.OpenDir(c, in, out)
}

func (r *rawFS) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	r.op(opReaddir)
	return r.RawFileSystem.ReadDir(c, in, out)
}

func (r *rawFS) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	r.op(opReaddirplus)
	return r.RawFileSystem.ReadDirPlus(c, in, out)
}

func (r *rawFS) ReleaseDir(in *fuse.ReleaseIn) {
	r.op(opReleasedir)
	r.RawFileSystem.ReleaseDir(in)
}

func (r *rawFS) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	r.op(opFsyncdir)
	return r.RawFileSystem.FsyncDir(c, in)
}

func (r *rawFS) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	r.op(opStatfs)
	return r.RawFileSystem.StatFs(c, h, out)
}
