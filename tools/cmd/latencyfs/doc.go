// Command latencyfs mounts a loopback view of a directory through FUSE and
// delays every operation that reaches it, to model Amazon EFS on a machine
// that has none:
//
//	latencyfs -root DIR -mnt MOUNTPOINT -read-latency 250us -write-latency 2.7ms [-stats-addr 127.0.0.1:7070]
//
// On EFS every file-system operation is a network round trip: AWS documents
// read latencies from about 250 µs and write latencies from about 2.7 ms. For
// SQLite on EFS the cost of a decision is therefore the number of operations
// it makes times their latency, and latencyfs shows both: it sleeps before
// serving each operation and counts operations by kind.
//
// # What is delayed
//
// Read-class operations wait -read-latency: LOOKUP, GETATTR, STATX, OPEN,
// OPENDIR, READ, READDIR(PLUS), READLINK, ACCESS, STATFS, GETLK, GETXATTR,
// LISTXATTR, LSEEK, IOCTL. Write-class operations wait -write-latency: WRITE,
// CREATE, MKNOD, MKDIR, SYMLINK, LINK, UNLINK, RMDIR, RENAME, SETATTR
// (truncate, chmod, chown, utimes), SETXATTR, REMOVEXATTR, FSYNC, FSYNCDIR,
// FALLOCATE, COPY_FILE_RANGE, FLUSH, and every SETLK and SETLKW, locking and
// unlocking alike. FLUSH is what close(2) waits for; it stands for the NFS
// CLOSE. RELEASE and RELEASEDIR, which the kernel sends in the background
// after the last close, and FORGET are counted but not delayed. -latency sets
// both latencies at once; zero latency is a plain loopback.
//
// Operations run concurrently: each request is served in its own goroutine,
// and the delay is a nanosleep(2) in that goroutine's thread, so one slow
// operation holds up only its caller.
//
// # No client caching
//
// The mount caches as little as FUSE allows, like an NFS client with caching
// off: entry, negative-entry and attribute timeouts are zero, so every path
// walk sends LOOKUPs and every stat a GETATTR; files are opened with
// FOPEN_DIRECT_IO, so every read(2) and write(2) is one READ or WRITE and
// nothing is read ahead or written back later; directory listings are not
// cached; and FUSE passthrough is refused, since it would let the kernel
// read and write the backing file without asking. What the kernel still
// keeps are inodes and dentries (revalidated on every use, released by
// FORGET) and, because extended attributes are refused with ENOSYS (EFS has
// none; -xattrs passes them through), the knowledge that there are none:
// after the first refusal it never asks again.
//
// # Locks
//
// The mount forwards POSIX record locks and flock(2) locks to latencyfs, which
// gives them POSIX semantics on the backing file: locks belong to the
// process, two processes conflict as on a local file, one process never
// conflicts with itself, and closing any descriptor of a file drops the
// closing process's locks on it (see lockTable). The locks are held in the
// host kernel, so they also hold against other mounts of the same directory,
// which is how several hosts sharing one EFS file system can be modelled.
//
// # Counters
//
// With -stats-addr, GET /stats returns the counters as JSON:
//
//	{"ops":{"write":14,"fsync":3,...},"total":48,"read_class":14,"write_class":31,"sleep_ns":91690000,...}
//
// and POST /reset returns them and sets them to zero, so a benchmark can reset,
// run N decisions, and divide. sleep_ns is the time actually slept, timer
// overshoot included. The counters are also printed to standard error on
// exit. latencyfs unmounts on SIGINT and SIGTERM.
package main
