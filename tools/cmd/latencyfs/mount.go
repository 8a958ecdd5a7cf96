package main

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// config says what to mount and how slow to make it.
type config struct {
	Root       string // the directory served
	Mountpoint string // created when missing
	Latency    latency
	// XAttrs passes extended attributes through. EFS (NFSv4.1) has none,
	// so by default they are refused with ENOSYS, after which the kernel
	// stops asking: otherwise it would ask for security.capability before
	// every truncate, a round trip an NFS client does not make.
	XAttrs bool
	// AllowOther lets other users than the one that mounted it use the
	// mount, as every user of a host may use an EFS mount.
	AllowOther bool
	Debug      bool // log every FUSE request and reply
}

// mount is a mounted latencyfs.
type mount struct {
	cfg    config
	stats  *stats
	server *fuse.Server
}

// noCache is the kernel's entry, negative-entry and attribute cache timeout:
// none, so every path walk sends LOOKUPs and every stat a GETATTR.
var noCache = time.Duration(0)

// mountFS mounts cfg.Root at cfg.Mountpoint and serves it until unmount.
//
// The mount forwards locks (EnableLocks), so the kernel sends every fcntl
// and flock lock to the file system instead of keeping it locally, and it
// refuses FUSE passthrough, which would let the kernel read and write the
// backing file without asking. It mounts with mount(2) directly, as root,
// and falls back to fusermount3 otherwise.
func mountFS(cfg config) (*mount, error) {
	if err := os.MkdirAll(cfg.Mountpoint, 0o755); err != nil {
		return nil, fmt.Errorf("create mountpoint: %w", err)
	}
	locks := newLockTable()
	root, err := newRoot(cfg.Root, locks)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", cfg.Root, err)
	}
	opts := &fs.Options{
		EntryTimeout:    &noCache,
		AttrTimeout:     &noCache,
		NegativeTimeout: &noCache,
		MountOptions: fuse.MountOptions{
			FsName:               cfg.Root,
			Name:                 "latencyfs",
			DirectMount:          true,
			EnableLocks:          true,
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			DisableXAttrs:        !cfg.XAttrs,
			AllowOther:           cfg.AllowOther,
			Debug:                cfg.Debug,
		},
	}
	if cfg.Debug {
		opts.MountOptions.Logger = log.New(os.Stderr, "", log.Lmicroseconds)
	}
	s := new(stats)
	raw := newRawFS(fs.NewNodeFS(root, opts), cfg.Latency, s, locks)
	server, err := fuse.NewServer(raw, cfg.Mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", cfg.Mountpoint, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		return nil, fmt.Errorf("mount %s: %w", cfg.Mountpoint, err)
	}
	return &mount{cfg: cfg, stats: s, server: server}, nil
}

// snapshot reads the counters.
func (m *mount) snapshot() snapshot { return m.stats.snapshot(m.cfg.Latency, false) }

// unmount unmounts and waits until the server has stopped. The kernel
// refuses while a process has a file open in the mount, so it retries for
// about five seconds before giving up.
func (m *mount) unmount() error {
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err = m.server.Unmount(); err == nil {
			m.server.Wait()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("unmount %s (is a file still open there?): %w", m.cfg.Mountpoint, err)
}
