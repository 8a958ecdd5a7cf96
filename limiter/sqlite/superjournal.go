package sqlite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Super-journals.
//
// A transaction over several shards (cross.go) commits through a
// super-journal: a file that SQLite names after the transaction's main
// database, its lowest shard, path + "-mj" and nine hex digits, and that
// lists the journals of the transaction's files. SQLite makes it and syncs
// it, writes its name at the end of each of those journals, syncs them,
// writes and syncs the files, and deletes it: that deletion is the commit
// point. After a crash, a journal that names a super-journal that exists is
// rolled back; one that names a missing super-journal is not (its
// transaction committed). And once the last journal that names a
// super-journal has been rolled back, SQLite deletes it (pager_delsuper in
// pager.c).
//
// A process killed after making the super-journal and before the first
// journal names it leaves a file that SQLite never deletes: no journal
// names it, so no rollback ever looks at it. Prune removes those, by
// pager_delsuper's rule: a super-journal may go when no journal names it,
// of the files it lists or of any shard, hot or not. A journal that is not
// hot counts too: one killed after its name was written and before its
// header was (SQLite writes the header last, at the journal's sync) is
// ignored, not deleted, and the next transaction on that file writes its
// own journal over it from the start without truncating it, so the old
// name stays at its end; should that transaction crash, its rollback reads
// that name, and finds the super-journal missing, would take the
// transaction for committed. Such a super-journal goes at the first prune
// after that file's next commit, which deletes the journal.
//
// Deleting the super-journal of a transaction still committing would commit
// that transaction half written: its journals, once they name the missing
// file, are no longer rolled back. So Prune looks at a super-journal, and
// deletes it, only inside one immediate transaction over its main database
// and every shard it lists. The transaction that made it held the write
// lock of every file it lists, from before it made the file to after it
// deleted it, and of its main database too: the store begins every
// cross-shard transaction IMMEDIATE, which write-locks every file attached,
// the main one included. So while Prune holds those locks, that
// transaction has ended (crashed, since the file is still there), and no
// journal can come to name the file. Taking the locks also rolls back any
// hot journal of those files, which deletes the super-journals SQLite can
// delete itself. (A super-journal that lists nothing yet is judged under
// its main database's lock alone: that excludes every transaction of the
// store's, though not one of someone else's on the shard files that writes
// only attached files, leaving the main one unlocked.)
//
// A super-journal that lists a file that is not one of the store's shards
// (a transaction of someone else's, on another database) is left alone.

// superJournalGone reports whether err is SQLite's failure to delete a
// super-journal that was no longer there (SQLITE_IOERR_DELETE_NOENT). Two
// connections that roll back two journals of one crashed commit at the same
// moment (two processes starting after the crash, or two shards of one
// opening at once) may each find the other's journal gone, and both delete
// the super-journal (pager_delsuper): the second fails, and with it the
// call that took the lock. Its rollback has completed all the same (the
// journal is finalized before the super-journal is looked at), so the call
// is tried again, up to superJournalRetries times: each time, at least one
// more journal has been rolled back.
//
// The same race seen from the other side fails with SQLITE_CANTOPEN: the
// rollback that deletes the super-journal first checks that each journal
// it lists exists and then opens it to read the name it ends with; a
// journal the other rollback deletes in between cannot be opened. That is
// tried again too, but only while a super-journal lies beside path: other
// causes of SQLITE_CANTOPEN (a directory missing) fail at once.
func superJournalGone(err error, path string) bool {
	var e *modernc.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_IOERR:
		return e.Code() == sqlite3.SQLITE_IOERR_DELETE_NOENT
	case sqlite3.SQLITE_CANTOPEN:
		found, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*-mj?????????"))
		return len(found) > 0
	}
	return false
}

// superJournalRetries bounds the tries again after superJournalGone: one
// for each file a transaction can hold.
const superJournalRetries = 1 + maxAttached

// superJournalMagic ends a journal that names a super-journal (aJournalMagic
// in pager.c, which also begins every journal header).
var superJournalMagic = []byte{0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7}

// maxAttached is how many files one transaction can attach beside its main
// one (SQLITE_MAX_ATTACHED in modernc.org/sqlite).
const maxAttached = 10

// removeSuperJournals deletes the super-journals of the store's shards that
// no journal names, and returns how many it deleted.
func (s *Store) removeSuperJournals(ctx context.Context) (int64, error) {
	found, err := s.superJournals()
	if err != nil || len(found) == 0 {
		return 0, err
	}
	journals := s.journalPaths()
	// SQLite lists the journals under the files' full paths, with any
	// symbolic link of the directory resolved.
	resolved := journals
	if dir, err := filepath.EvalSymlinks(filepath.Dir(s.path)); err == nil && dir != filepath.Dir(s.path) {
		resolved = make([]string, len(journals))
		for i, j := range journals {
			resolved[i] = filepath.Join(dir, filepath.Base(j))
		}
	}
	var removed int64
	for _, sj := range found {
		lock, ok := s.locksFor(sj, journals, resolved)
		if !ok {
			continue
		}
		err := writeAcross(ctx, "remove super-journal", lock, func(func(string) *statements) error {
			gone, err := removeIfStale(sj, journals)
			if gone {
				removed++
			}
			return err
		})
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// superJournal is a super-journal found beside the store's files: its
// path, the shard it is named after (its transaction's main database), and
// the journals it lists.
type superJournal struct {
	path   string
	main   int
	listed []string
}

// superJournals lists the super-journals named after the store's shards,
// with what each lists.
func (s *Store) superJournals() ([]superJournal, error) {
	dir := filepath.Dir(s.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite: look for super-journals in %s: %w", dir, err)
	}
	var out []superJournal
	for _, e := range entries {
		main := s.superJournalOf(e.Name())
		if main < 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile: a commit, or a rollback
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: read super-journal: %w", err)
		}
		sj := superJournal{path: path, main: main}
		for name := range bytes.SplitSeq(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
			if len(name) > 0 {
				sj.listed = append(sj.listed, string(name))
			}
		}
		out = append(out, sj)
	}
	return out, nil
}

// superJournalOf is the shard that name, a file name in the store's
// directory, is a super-journal of: the shard's file name, "-mj" and nine
// upper-case hex digits, the third last a 9 (pagerIsSuperJrnlName and
// vdbeCommit in SQLite). It is -1 for any other name.
func (s *Store) superJournalOf(name string) int {
	i := strings.LastIndex(name, "-mj")
	if i < 0 || len(name)-i != 12 || name[len(name)-3] != '9' {
		return -1
	}
	for _, c := range name[i+3:] {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'F') {
			return -1
		}
	}
	for _, sh := range s.shards {
		if filepath.Base(sh.path) == name[:i] {
			return sh.index
		}
	}
	return -1
}

// journalPaths are the rollback journals of every shard.
func (s *Store) journalPaths() []string {
	out := make([]string, len(s.shards))
	for i, sh := range s.shards {
		out[i] = sh.path + "-journal"
	}
	return out
}

// locksFor is the shards whose write locks exclude a commit through sj, in
// ascending order: its main database and every shard it lists (journals,
// by shard, as configured and with symbolic links resolved). It reports
// false when sj lists a file that is not a shard's, or more files than one
// transaction can hold.
func (s *Store) locksFor(sj superJournal, journals, resolved []string) ([]*shard, bool) {
	idx := []int{sj.main}
	for _, name := range sj.listed {
		i := slices.Index(journals, name)
		if i < 0 {
			i = slices.Index(resolved, name)
		}
		if i < 0 {
			return nil, false
		}
		idx = append(idx, i)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	if len(idx) > 1+maxAttached {
		return nil, false
	}
	out := make([]*shard, len(idx))
	for i, j := range idx {
		out[i] = s.shards[j]
	}
	return out, true
}

// removeIfStale deletes sj unless a journal names it, of the files it
// lists or of the shards (journals), and reports whether it deleted it.
// The caller holds the locks locksFor names.
func removeIfStale(sj superJournal, journals []string) (bool, error) {
	fi, err := os.Stat(sj.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // rolled back as the locks were taken
	}
	if err != nil {
		return false, err
	}
	for _, j := range append(slices.Clone(journals), sj.listed...) {
		named, err := superJournalNamedBy(j)
		if err != nil {
			return false, err
		}
		if named == "" {
			continue
		}
		if nfi, err := os.Stat(named); err == nil && os.SameFile(fi, nfi) {
			return false, nil
		}
	}
	if err := os.Remove(sj.path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// superJournalNamedBy reads the super-journal name at the end of the
// journal at path, "" when the journal does not exist or names none, as
// SQLite's readSuperJournal does. A journal that names one ends with:
//
//	4 bytes  PAGER_SJ_PGNO (the lock page's number)
//	N bytes  the super-journal's path, UTF-8
//	4 bytes  N, big-endian
//	4 bytes  checksum: the sum of the path's bytes, each a signed 8-bit
//	         integer, big-endian
//	8 bytes  the journal magic
//
// Anything that does not check out (length, checksum, magic, a name that is
// not a super-journal's) names none, as for SQLite.
func superJournalNamedBy(path string) (string, error) {
	// The journal, never the database: closing a descriptor of the
	// database file would drop this process's locks on it.
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := fi.Size()
	if size < 16 {
		return "", nil
	}
	var tail [16]byte
	if _, err := f.ReadAt(tail[:], size-16); err != nil {
		return "", err
	}
	n := int64(binary.BigEndian.Uint32(tail[0:4]))
	sum := binary.BigEndian.Uint32(tail[4:8])
	if !bytes.Equal(tail[8:], superJournalMagic) || n == 0 || n > size-16 || n > 4096 {
		return "", nil
	}
	name := make([]byte, n)
	if _, err := f.ReadAt(name, size-16-n); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	for _, c := range name {
		sum -= uint32(int8(c))
	}
	if sum != 0 || bytes.IndexByte(name, 0) >= 0 {
		return "", nil
	}
	return string(name), nil
}
