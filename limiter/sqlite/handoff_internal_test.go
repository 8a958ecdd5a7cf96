package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// A slot is read as a request only when it holds a whole one of this
// version: a half-written or stale slot, or one of another release, is
// left to its process, which decides it itself.
func TestASlotIsARequestOnlyWhenWhole(t *testing.T) {
	token := strings.Repeat("ab", 16)
	attempts := []limiter.Attempt{{Charges: []limiter.Charge{{Key: "k"}}}}
	slot := func(v int) []byte {
		b, err := encodeSlot(token, time.Now().Add(time.Second), request{V: v, Attempts: attempts})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	whole := slot(requestVersion)
	if q, ok := parseSlot(whole); !ok || q.token != token || len(q.req.Attempts) != 1 {
		t.Errorf("a whole request read as %+v, %v", q, ok)
	}
	body := whole[bytes.IndexByte(whole, '\n')+1:]
	for name, b := range map[string][]byte{
		"cut short":                 whole[:len(whole)-len(body)/2],
		"another version":           slot(2),
		"cleared":                   append(make([]byte, len(slotMagic)+1), whole[len(slotMagic)+1:]...),
		"no header end":             []byte(slotMagic + token),
		"a bad token":               bytes.Replace(whole, []byte(token), []byte(strings.Repeat("zz", 16)), 1),
		"a changed body":            bytes.Replace(whole, []byte(`"k"`), []byte(`"j"`), 1),
		"the format before the sum": append(fmt.Appendf(nil, "RLHO1 %s %d %d\n", token, time.Now().Add(time.Second).UnixNano(), len(body)), body...),
	} {
		if _, ok := parseSlot(b); ok {
			t.Errorf("%s: read as a request", name)
		}
	}
}

// An outcome recorded for a request, which another process decided and
// counted, but that cannot be read back (a corrupt row, another release's
// encoding) fails the batch: it is never taken for no outcome, which would
// decide the attempt again.
func TestAnUnreadableOutcomeIsNotDecidedAgain(t *testing.T) {
	ctx := context.Background()
	_, sh, h := withHandoffs(t, filepath.Join(t.TempDir(), "h.db"))
	defer sh.release(h)
	token := strings.Repeat("cd", 16)
	if _, err := h.db.ExecContext(ctx, recordSQL, token+".0", []byte(`{"v":9}`)); err != nil {
		t.Fatal(err)
	}
	ho := &handOff{sh: sh, token: token, slot: -1, outs: make([]decide.Outcome, 1), got: make([]bool, 1), written: time.Now()}
	if err := ho.read(ctx, h.db); !errors.Is(err, errUnreadable) {
		t.Errorf("read: %v, want %v", err, errUnreadable)
	}
	if ho.served(ctx, h) || ho.got[0] {
		t.Error("an unreadable outcome answered the batch")
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ho.slot = 0 // as if it held a slot: claim reads under the lock
	if err := ho.claim(ctx, tx); !errors.Is(err, errUnreadable) {
		t.Errorf("claim: %v, want %v: the batch would decide the attempt again", err, errUnreadable)
	}
}

// Prune deletes the outcomes of requests written longer ago than any
// waiter can still read them, and keeps the others.
func TestPruneDeletesOnlyOutcomesNoWaiterStillReads(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	s, sh, h := withHandoffs(t, path)
	old := tokenTime(time.Now().Add(-sh.handoffKeep()-time.Minute)) + strings.Repeat("0", 16)
	young := tokenTime(time.Now().Add(-sh.handoffKeep()+time.Minute)) + strings.Repeat("0", 16)
	for _, tok := range []string{old + ".0", old + ".1", young + ".0"} {
		if _, err := h.db.ExecContext(ctx, recordSQL, tok, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	sh.release(h)
	if _, err := sh.requests.file(path, true); err != nil { // a request file, as a waiter leaves one
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, time.Now(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	h, err := sh.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.release(h)
	var left []string
	rows, err := h.db.QueryContext(ctx, `SELECT token FROM handoffs ORDER BY token`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tok string
		rows.Scan(&tok)
		left = append(left, tok)
	}
	if len(left) != 1 || left[0] != young+".0" {
		t.Errorf("left %v, want only %s.0", left, young)
	}
}

// withHandoffs opens a store on a new file at path, with the handoffs
// table, and returns it, its shard and a handle the caller releases.
func withHandoffs(t *testing.T, path string) (*Store, *shard, *handle) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: path, JournalMode: "DELETE"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sh := s.shards[0]
	h, err := sh.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.ExecContext(ctx, createHandoffsSQL); err != nil {
		sh.release(h)
		t.Fatal(err)
	}
	return s, sh, h
}

// recorded is a hand-off of one attempt due by deadline, whose outcome a
// holder has recorded on h under token.
func recorded(t *testing.T, sh *shard, h *handle, token string, deadline time.Time) *handOff {
	t.Helper()
	out, err := decide.MarshalOutcome(decide.Outcome{Allowed: true, Decisions: make([]decide.Decision, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.ExecContext(context.Background(), recordSQL, token+".0", out); err != nil {
		t.Fatal(err)
	}
	return &handOff{sh: sh, token: token, slot: -1, deadline: deadline, written: time.Now(), outs: make([]decide.Outcome, 1), got: make([]bool, 1)}
}

// The read of a waiter's outcomes after its deadline (settleLate, once the
// holder that took its request has committed) takes as long as reads of
// outcomes have taken here, not a fixed 100 ms: on slow storage a read cut
// off there told the client of an error for an attempt that was counted.
// And a call whose client has gone (its context cancelled) reads for no
// longer than that either, rather than hold the shard's one connection
// for the rest of its budget to read an answer nobody waits for.
func TestAReadOfOutcomesTakesAsLongAsReadsHaveTaken(t *testing.T) {
	ctx := context.Background()
	_, sh, h := withHandoffs(t, filepath.Join(t.TempDir(), "r.db"))
	defer sh.release(h)
	slow := 250 * time.Millisecond
	testHookOpen = func(stage, _ string) {
		if stage == "outcomes" {
			time.Sleep(slow)
		}
	}
	defer func() { testHookOpen = nil }()
	if !recorded(t, sh, h, strings.Repeat("a1", 16), time.Now().Add(5*time.Second)).collect(ctx, h, true) {
		t.Fatalf("a read of %v, well within its deadline, found no outcome", slow)
	}
	// This process's own transactions are short (a served read also folds
	// into that average): its reads are what is slow.
	sh.wait.store.hold.Store(int64(time.Millisecond))
	if !recorded(t, sh, h, strings.Repeat("b2", 16), time.Now().Add(-time.Second)).collect(ctx, h, true) {
		t.Errorf("a read after the deadline was cut off before %v, though reads here take that", slow)
	}
	slow = time.Second
	gone, cancel := context.WithCancel(ctx)
	cancel()
	begun := time.Now()
	if recorded(t, sh, h, strings.Repeat("c3", 16), time.Now().Add(5*time.Second)).collect(gone, h, true) {
		t.Errorf("a cancelled call read on for %v and found its outcome, where reads here take %v: it held the connection for the rest of its 5 s budget", time.Since(begun).Round(time.Millisecond), 250*time.Millisecond)
	}
}

// A holder may read a slot while its waiter writes a new request over the
// one it held before (nothing orders a read of the file against another
// process's write, and Linux does not make them atomic to each other): it
// can see the new request's header and the old one's body, or any other
// splice of the two. Such a slot is never read as a request: taken for
// one, the holder decided the old request's attempts under the new token,
// counted them again, and answered the new request with the old one's
// outcomes (a tester saw a waiter told of another key's count).
func TestATornSlotIsNoRequest(t *testing.T) {
	mk := func(tag string, keys ...string) ([]byte, string, []limiter.Attempt) {
		token := tokenTime(time.Now()) + strings.Repeat(tag, 8)
		var as []limiter.Attempt
		for i, k := range keys {
			as = append(as, limiter.Attempt{Charges: []limiter.Charge{{Policy: limiter.Policy{Name: "p", Limit: 9, Window: time.Hour}, Key: k}}, RequestID: fmt.Sprintf("%s-%d", tag, i)})
		}
		b, err := encodeSlot(token, time.Now().Add(time.Hour), request{V: requestVersion, Attempts: as})
		if err != nil {
			t.Fatal(err)
		}
		return b, token, as
	}
	older, tokOld, asOld := mk("a1", "k1", "k2")
	newer, tokNew, asNew := mk("b2", "k3", "k4")
	if len(older) != len(newer) {
		t.Fatalf("slots of %d and %d bytes: the test wants a splice of two of one length", len(older), len(newer))
	}
	jsonOf := func(as []limiter.Attempt) []byte { b, _ := json.Marshal(as); return b }
	whole := map[string][]byte{tokOld: jsonOf(asOld), tokNew: jsonOf(asNew)}
	for _, pair := range [][2][]byte{{newer, older}, {older, newer}} {
		for k := range len(older) + 1 {
			torn := append(append([]byte{}, pair[0][:k]...), pair[1][k:]...)
			q, ok := parseSlot(torn)
			if !ok {
				continue
			}
			got, _ := json.Marshal(q.req.Attempts)
			if want, known := whole[q.token]; !known || string(got) != string(want) {
				t.Fatalf("a splice at byte %d read as request %s with attempts %s", k, q.token, got)
			}
		}
	}
}

// TestALateReadWaitsOutAnotherCommit: a waiter whose wait ran out reads
// what the holder committed for it once that holder's COMMIT has ended
// (settleLate); by then another process may be committing, and in a
// rollback journal a read is refused (SQLITE_BUSY, at once: the store
// lets SQLite wait for nothing) while a commit holds the file. The read
// is tried again until its bound, not taken for no outcome: the waiter
// was told of an error for an attempt that was counted (a tester saw two,
// 16 processes on one file). Between its tries it gives the shard's one
// connection back: this process's other calls are not held up meanwhile.
func TestALateReadWaitsOutAnotherCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	_, sh, h := withHandoffs(t, path)
	defer sh.release(h)
	ho := recorded(t, sh, h, strings.Repeat("d4", 16), time.Now().Add(-time.Second))
	ho.slot = 0                                             // it holds a slot, which settleLate clears
	if _, err := sh.requests.file(path, true); err != nil { // its slot's file
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil { // another's commit, holding the file
		t.Fatal(err)
	}
	committed, meanwhile := make(chan error, 1), make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		// Another call of this process, while the late read retries.
		qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		var one int
		meanwhile <- h.db.QueryRowContext(qctx, "SELECT 1").Scan(&one)
		cancel()
		time.Sleep(100 * time.Millisecond)
		_, err := conn.ExecContext(ctx, "COMMIT")
		committed <- err
	}()
	sh.wait.store.hold.Store(int64(200 * time.Millisecond)) // transactions here are long: the bound is 400 ms
	gone, cancel := context.WithTimeout(ctx, -time.Second)
	defer cancel()
	if !ho.settleLate(gone, h) {
		t.Error("a late read refused while another process committed took the committed outcome for none")
	}
	if err := <-meanwhile; err != nil {
		t.Errorf("another call of this process, during the late read's tries: %v", err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
}
