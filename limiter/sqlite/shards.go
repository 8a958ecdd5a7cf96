package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ft251/ratelimit/limiter"
)

// Shards.
//
// With cfg.Shards = N above 1, the counters are spread over N files: shard
// 0 is the database path itself, shard i is path + ".shard-<i>". A client
// key's counters, GCRA buckets and overrides, under every policy, live in
// the shard that a hash of the client key chooses (see shardIndex): a hash
// of the bytes alone, the same in every process and every build. Not of the
// store key (the policy's namespace and the key): a request's policies
// mostly count one client key (a per-minute limit, a burst limit, a daily
// quota), and hashing the client key keeps them in one file, decided in one
// file's transaction; a request across files costs about 2.6 times one in a
// single file on the EFS model (BENCHMARKS.md). Policies with different key
// sources (an address and a header, say) may still fall apart. An allowed
// attempt's audit record goes into the shard of its first check.
//
// Every file records its index and N (the layout table). A store refuses a
// file that records another layout, and one with data but no layout (a
// single-file database from before shards) when N is above 1: a key must
// never be counted in two places. Shard 0 is opened, and its layout
// checked, before any other shard serves.
//
// A request whose charges fall into one shard is decided in that shard's
// transaction, batched with the others waiting for it (batch.go). One
// whose charges fall into several is decided in one transaction over all of
// them (cross.go).

// ShardPath is the path of shard i of the database at path.
func ShardPath(path string, i int) string {
	if i == 0 {
		return path
	}
	return path + ".shard-" + strconv.Itoa(i)
}

// shardIndex is the shard, of n, that keeps key's counters: FNV-1a
// (64 bits) of the key, mixed by MurmurHash3's 64-bit finalizer, modulo n.
// FNV-1a alone spreads short keys badly: its low k bits depend only on the
// low k bits of the key's bytes (so with n a power of two, "k0" and "k4"
// always shared a shard), and a short key's last bytes barely reach its
// high bits (so "k0" to "k7" all fell into one shard of four). The
// finalizer makes every bit of the result depend on every bit of the hash.
func shardIndex(key string, n int) int {
	if n == 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(fmix64(h.Sum64()) % uint64(n))
}

// fmix64 is MurmurHash3's finalizer: a bijection on 64 bits that mixes
// every input bit into every output bit.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// ShardOf is the index of the shard, of n, that keeps the client key's
// counters under every policy: for tools and tests that read the files
// directly.
func ShardOf(key string, n int) int { return shardIndex(key, n) }

// shardOf is the shard that keeps key's counters.
func (s *Store) shardOf(key string) *shard {
	return s.shards[shardIndex(key, len(s.shards))]
}

// shardsOf lists, in ascending order and once each, the shards a's charges
// fall into.
func (s *Store) shardsOf(a limiter.Attempt) []int {
	idx := make([]int, 0, len(a.Charges))
	for _, c := range a.Charges {
		idx = append(idx, shardIndex(c.Key, len(s.shards)))
	}
	slices.Sort(idx)
	return slices.Compact(idx)
}

// first opens shard 0, and so charges the layout it records, once, before
// any other shard serves: a single-file database opened with N shards is
// refused before a key is counted in a fresh shard beside it.
func (s *Store) first(ctx context.Context) error {
	if len(s.shards) == 1 || s.layoutSeen.Load() {
		return nil
	}
	return s.Ready(ctx)
}

// route is the shard that keeps key's counters, once the layout has been
// seen.
func (s *Store) route(ctx context.Context, key string) (*shard, error) {
	if err := s.first(ctx); err != nil {
		return nil, err
	}
	return s.shardOf(key), nil
}

const (
	layoutSQL    = `SELECT shard, shards FROM layout WHERE id = 0`
	setLayoutSQL = `INSERT INTO layout (id, shard, shards) VALUES (0, ?1, ?2)`
	hasDataSQL   = `SELECT EXISTS (SELECT 1 FROM rate_limit_windows) OR EXISTS (SELECT 1 FROM api_calls)
OR EXISTS (SELECT 1 FROM gcra_buckets) OR EXISTS (SELECT 1 FROM overrides)`
)

// checkLayout is prepare's layout check for a read-only store, which
// records nothing: it accepts a file without a layout that holds no data,
// or that it reads as the only shard.
func (sh *shard) checkLayout(ctx context.Context, db *sql.DB) error {
	found, err := sh.compareLayout(ctx, db)
	if err != nil || found {
		return err
	}
	return sh.unrecorded(ctx, db)
}

// recordLayout checks that the file of tx records sh's place in the
// layout, and records it if the file has none yet (prepare's second
// change, in the transaction of its first).
func (sh *shard) recordLayout(ctx context.Context, tx *sql.Tx) error {
	found, err := sh.compareLayout(ctx, tx)
	if err != nil || found {
		return err
	}
	if err := sh.unrecorded(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, setLayoutSQL, sh.index, sh.count); err != nil {
		return fmt.Errorf("record layout: %w", err)
	}
	return nil
}

// compareLayout reads the layout q's file records, if any, and refuses one
// that is not sh's.
func (sh *shard) compareLayout(ctx context.Context, q querier) (bool, error) {
	var index, count int
	err := q.QueryRowContext(ctx, layoutSQL).Scan(&index, &count)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read layout: %w", err)
	}
	if count == sh.count && index != sh.index {
		// The right count, the wrong path: a file copied or renamed from
		// another shard's, whose keys hash elsewhere.
		return true, fmt.Errorf("%s holds shard %d of %d, which belongs at %s: a file copied or renamed from another shard's path; "+
			"put each file back at its own path, or move the files away: %w",
			filepath.Base(sh.path), index, count, filepath.Base(ShardPath(layoutBase(sh.path, sh.index), index)), errSchema)
	}
	if index != sh.index || count != sh.count {
		return true, fmt.Errorf("this file is shard %d of %d (%s), but this process is configured for shard %d of %d (SQLITE_SHARDS=%d, %s): "+
			"start it with SQLITE_SHARDS=%d, or move the files away: %w",
			index, count, layoutFiles(sh.path, index, count), sh.index, sh.count, sh.count, layoutFiles(sh.path, sh.index, sh.count), count, errSchema)
	}
	return true, nil
}

// unrecorded refuses a file without a layout that holds data, unless it is
// the only shard: a database from before shards (or made by hand) is a
// single-file layout, and spreading keys beside it would count them anew.
func (sh *shard) unrecorded(ctx context.Context, q querier) error {
	if sh.count == 1 {
		return nil
	}
	var data bool
	if err := q.QueryRowContext(ctx, hasDataSQL).Scan(&data); err != nil {
		return fmt.Errorf("read layout: %w", err)
	}
	if data {
		return fmt.Errorf("this file holds counters but records no layout: it is a single-file database (SQLITE_SHARDS=1), "+
			"and this process is configured for %d shards (%s): start it with SQLITE_SHARDS=1: %w",
			sh.count, layoutFiles(sh.path, sh.index, sh.count), errSchema)
	}
	return nil
}

// layoutBase is DB_PATH, given the path of shard index.
func layoutBase(path string, index int) string {
	if index > 0 {
		return path[:len(path)-len(ShardPath("", index))]
	}
	return path
}

// layoutFiles names the files of a layout of count shards, given the path
// of shard index.
func layoutFiles(path string, index, count int) string {
	base := layoutBase(path, index)
	switch count {
	case 1:
		return filepath.Base(base) + " alone"
	case 2:
		return filepath.Base(base) + " and " + filepath.Base(ShardPath(base, 1))
	}
	return fmt.Sprintf("%s, %s … %s", filepath.Base(base), filepath.Base(ShardPath(base, 1)), filepath.Base(ShardPath(base, count-1)))
}
