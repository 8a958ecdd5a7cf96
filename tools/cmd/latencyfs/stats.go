package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync/atomic"
	"time"
)

// op is a kind of FUSE request, as counted. Most are one opcode; SETLK and
// SETLKW are split by what they ask for, so that taking and dropping a lock
// can be told apart.
type op int

const (
	opLookup op = iota
	opGetattr
	opStatx
	opOpen
	opOpendir
	opRead
	opReaddir
	opReaddirplus
	opReadlink
	opAccess
	opStatfs
	opGetlk
	opGetxattr
	opListxattr
	opLseek
	opIoctl

	opSetattr
	opMknod
	opMkdir
	opSymlink
	opLink
	opUnlink
	opRmdir
	opRename
	opSetxattr
	opRemovexattr
	opCreate
	opTmpfile
	opWrite
	opCopyFileRange
	opFallocate
	opFlush
	opFsync
	opFsyncdir
	opSetlk  // SETLK taking a read or write lock
	opSetlkw // SETLKW taking a read or write lock, waiting for it
	opUnlock // SETLK or SETLKW with F_UNLCK

	opRelease
	opReleasedir
	opForget

	numOps
)

// class says what an op costs: a read-class or write-class round trip, or
// nothing.
type class int

const (
	readClass class = iota
	writeClass
	freeClass
)

// opInfo names each op (its key in the JSON counters) and gives its class.
//
// What is a round trip follows what an NFSv4.1 client such as the one Lambda
// uses for EFS sends to the server when it caches nothing: lookups,
// attribute fetches, opens, reads and lock tests are read-class; everything
// that changes the file system or its lock state is write-class, and so is
// FLUSH, which the kernel sends synchronously on every close(2) and which
// stands for the NFS CLOSE a closing process waits for. RELEASE and
// RELEASEDIR come after the last close without anyone waiting (the kernel
// sends them in the background), so they are counted but free, like FORGET,
// which only drops the kernel's reference to an inode.
var opInfo = [numOps]struct {
	name  string
	class class
}{
	opLookup:      {"lookup", readClass},
	opGetattr:     {"getattr", readClass},
	opStatx:       {"statx", readClass},
	opOpen:        {"open", readClass},
	opOpendir:     {"opendir", readClass},
	opRead:        {"read", readClass},
	opReaddir:     {"readdir", readClass},
	opReaddirplus: {"readdirplus", readClass},
	opReadlink:    {"readlink", readClass},
	opAccess:      {"access", readClass},
	opStatfs:      {"statfs", readClass},
	opGetlk:       {"getlk", readClass},
	opGetxattr:    {"getxattr", readClass},
	opListxattr:   {"listxattr", readClass},
	opLseek:       {"lseek", readClass},
	opIoctl:       {"ioctl", readClass},

	opSetattr:       {"setattr", writeClass},
	opMknod:         {"mknod", writeClass},
	opMkdir:         {"mkdir", writeClass},
	opSymlink:       {"symlink", writeClass},
	opLink:          {"link", writeClass},
	opUnlink:        {"unlink", writeClass},
	opRmdir:         {"rmdir", writeClass},
	opRename:        {"rename", writeClass},
	opSetxattr:      {"setxattr", writeClass},
	opRemovexattr:   {"removexattr", writeClass},
	opCreate:        {"create", writeClass},
	opTmpfile:       {"tmpfile", writeClass},
	opWrite:         {"write", writeClass},
	opCopyFileRange: {"copy_file_range", writeClass},
	opFallocate:     {"fallocate", writeClass},
	opFlush:         {"flush", writeClass},
	opFsync:         {"fsync", writeClass},
	opFsyncdir:      {"fsyncdir", writeClass},
	opSetlk:         {"setlk", writeClass},
	opSetlkw:        {"setlkw", writeClass},
	opUnlock:        {"unlock", writeClass},

	opRelease:    {"release", freeClass},
	opReleasedir: {"releasedir", freeClass},
	opForget:     {"forget", freeClass},
}

// latency is the delay injected before serving each op of a class. The zero
// value injects none: a plain loopback.
type latency struct {
	Read  time.Duration // before each read-class op
	Write time.Duration // before each write-class op
	// BufferWrites makes WRITE free, as an NFS client's write-back cache
	// does: it sends buffered writes together and waits for them at the
	// next fsync or close, which keep their write-class delay.
	BufferWrites bool
}

// of returns the delay for an op.
func (l latency) of(o op) time.Duration {
	if l.BufferWrites && o == opWrite {
		return 0
	}
	switch opInfo[o].class {
	case readClass:
		return l.Read
	case writeClass:
		return l.Write
	}
	return 0
}

// stats counts ops by kind and the time spent sleeping before them. It is
// safe for simultaneous use: every field is updated atomically, and a
// snapshot taken while ops run may be off by the ops in flight.
type stats struct {
	ops     [numOps]atomic.Int64
	sleepNs atomic.Int64
}

// add records one op and how long it was delayed.
func (s *stats) add(o op, slept time.Duration) {
	s.ops[o].Add(1)
	if slept > 0 {
		s.sleepNs.Add(int64(slept))
	}
}

// snapshot is the counters at one moment, as served on /stats.
type snapshot struct {
	// Ops has one entry for every kind of op, zeros included, so that a
	// benchmark can subtract two snapshots key by key.
	Ops map[string]int64 `json:"ops"`
	// Total is the sum of Ops; Reads and Writes are the read-class and
	// write-class parts of it (the rest are free ops: release, forget).
	Total  int64 `json:"total"`
	Reads  int64 `json:"read_class"`
	Writes int64 `json:"write_class"`
	// SleepNs is the time actually spent in the injected sleeps, which
	// exceeds count × latency by the timer's overshoot.
	SleepNs int64 `json:"sleep_ns"`
	// ReadLatencyNs and WriteLatencyNs are the configured delays.
	ReadLatencyNs  int64 `json:"read_latency_ns"`
	WriteLatencyNs int64 `json:"write_latency_ns"`
}

// snapshot reads the counters; with reset, it zeros each one as it reads it.
func (s *stats) snapshot(l latency, reset bool) snapshot {
	out := snapshot{
		Ops:            make(map[string]int64, numOps),
		ReadLatencyNs:  int64(l.Read),
		WriteLatencyNs: int64(l.Write),
	}
	for o := op(0); o < numOps; o++ {
		var n int64
		if reset {
			n = s.ops[o].Swap(0)
		} else {
			n = s.ops[o].Load()
		}
		out.Ops[opInfo[o].name] = n
		out.Total += n
		switch opInfo[o].class {
		case readClass:
			out.Reads += n
		case writeClass:
			out.Writes += n
		}
	}
	if reset {
		out.SleepNs = s.sleepNs.Swap(0)
	} else {
		out.SleepNs = s.sleepNs.Load()
	}
	return out
}

// sub returns the counts in s that were not yet in before: the ops between
// two snapshots.
func (s snapshot) sub(before snapshot) snapshot {
	out := s
	out.Ops = make(map[string]int64, len(s.Ops))
	for k, v := range s.Ops {
		out.Ops[k] = v - before.Ops[k]
	}
	out.Total -= before.Total
	out.Reads -= before.Reads
	out.Writes -= before.Writes
	out.SleepNs -= before.SleepNs
	return out
}

// print writes the non-zero counters, one per line, largest first.
func (s snapshot) print(w io.Writer) {
	names := make([]string, 0, len(s.Ops))
	for k, v := range s.Ops {
		if v != 0 {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if s.Ops[names[i]] != s.Ops[names[j]] {
			return s.Ops[names[i]] > s.Ops[names[j]]
		}
		return names[i] < names[j]
	})
	fmt.Fprintf(w, "latencyfs: %d ops (%d read-class, %d write-class), %v slept\n",
		s.Total, s.Reads, s.Writes, time.Duration(s.SleepNs))
	for _, k := range names {
		fmt.Fprintf(w, "  %-16s %d\n", k, s.Ops[k])
	}
}

// statsHandler serves the counters: GET /stats returns a snapshot as JSON,
// POST /reset returns one and zeros the counters, so a benchmark can reset,
// run N decisions and divide the next GET by N.
func statsHandler(s *stats, l latency) http.Handler {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, snap snapshot) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(snap)
	}
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		write(w, s.snapshot(l, false))
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		write(w, s.snapshot(l, true))
	})
	return mux
}
