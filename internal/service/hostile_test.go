package service_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// hostileFixture is a fixture whose store the test also reads through a
// second connection.
func hostileFixture(t *testing.T, opts service.Options) (*fixture, *checkedStore) {
	t.Helper()
	return hostileFixtureIn(t, sqlite.DefaultJournalMode, opts)
}

func hostileFixtureIn(t *testing.T, journalMode string, opts service.Options) (*fixture, *checkedStore) {
	t.Helper()
	c := openCheckedStoreIn(t, journalMode)
	opts.Store = c.store
	return newFixture(t, opts), c
}

// pingKey sends key as the X-Client-Key header, exactly: httptest's
// NewRequest neither trims nor checks header values.
func (f *fixture) pingKey(t *testing.T, key string) *httptest.ResponseRecorder {
	t.Helper()
	return f.do(t, "GET", "/ping", "X-Client-Key", key)
}

// wantKeyRoundTrip checks that key was counted under exactly its bytes: /ping
// answered 200 naming it, its counter row holds it byte for byte with count
// n, and /status reads it back from the URL-encoded query with either
// encoding of a space (+ or %20).
func wantKeyRoundTrip(t *testing.T, f *fixture, c *checkedStore, w *httptest.ResponseRecorder, key string, n int64) {
	t.Helper()
	if w.Code != 200 {
		t.Fatalf("key %q: %d %s, want 200", key, w.Code, w.Body)
	}
	if got := decode(t, w)["key"]; got != key {
		t.Errorf("body key %q, want %q exactly", got, key)
	}
	if rows, count := c.stored(t, key); rows != 1 || count != n {
		t.Errorf("key %q: %d rows hold its bytes, with count %d; want 1 row with count %d", key, rows, count, n)
	}
	for _, q := range []string{url.QueryEscape(key), strings.NewReplacer("+", "%2B", "&", "%26").Replace(url.PathEscape(key))} {
		w := f.do(t, "GET", "/status?key="+q)
		if b := decode(t, w); w.Code != 200 || b["key"] != key || b["count"] != float64(n) {
			t.Errorf("/status?key=%s: %d %v, want key %q with count %d", q, w.Code, b, key, n)
		}
	}
}

func TestKeysAtTheByteLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"256 ASCII bytes", strings.Repeat("k", 256), true},
		{"128 two-byte runes", strings.Repeat("é", 128), true},
		{"85 three-byte runes and one ASCII byte", strings.Repeat("鍵", 85) + "k", true},
		{"64 four-byte runes", strings.Repeat("🔑", 64), true},
		{"257 ASCII bytes", strings.Repeat("k", 257), false},
		{"128 two-byte runes and one ASCII byte", strings.Repeat("é", 128) + "k", false},
		{"86 three-byte runes", strings.Repeat("鍵", 86), false},
		{"65 four-byte runes", strings.Repeat("🔑", 65), false},
		{"a four-byte rune cut at byte 256", (strings.Repeat("k", 254) + "🔑")[:256], false},
		{"a two-byte rune cut at byte 256", (strings.Repeat("k", 255) + "é")[:256], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := hostileFixture(t, service.Options{})
			w := f.pingKey(t, tc.key)
			if tc.ok {
				wantKeyRoundTrip(t, f, c, w, tc.key, 1)
				return
			}
			p := wantProblem(t, w, 400, service.TypeInvalidKey, "/ping")
			if strings.Contains(p["detail"].(string), tc.key) {
				t.Errorf("the 400 echoes the rejected key: %v", p["detail"])
			}
			if got := c.tables(t); got != (sqlitetest.Rows{}) {
				t.Errorf("a rejected key left rows: %+v", got)
			}
			wantProblem(t, f.do(t, "GET", "/status?key="+url.QueryEscape(tc.key)), 400, service.TypeInvalidKey, "/status")
		})
	}
}

func TestUnicodeKeysAreStoredAndEchoedExactly(t *testing.T) {
	f, c := hostileFixture(t, service.Options{})
	keys := []string{
		"🔑🦀",
		"👨\u200d👩\u200d👧",  // one grapheme, three emoji joined by U+200D
		"鍵の持ち主",            // CJK
		"مفتاح العميل",     // Arabic, right to left
		"מפתח",             // Hebrew
		"e\u0301",          // e and a combining acute accent (NFD)...
		"\u00e9",           // ...and the precomposed é (NFC): two keys, not normalized
		"\u2126", "\u03a9", // the ohm sign and capital omega: two keys
		"\ufeffbom",              // a byte order mark
		"a\u2028b",               // a line separator, which JSON must escape
		"<script>&amp;</script>", // HTML that json.Marshal escapes as \u003c
		"clé 鍵 🔑 + % & = ?",      // characters a query string must escape
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			wantKeyRoundTrip(t, f, c, f.pingKey(t, key), key, 1)
		})
	}
	// Every key has its own row: nothing was normalized or merged.
	if got := c.tables(t); got.Windows != int64(len(keys)) || got.Calls != int64(len(keys)) {
		t.Errorf("tables %+v, want %d rows in each", got, len(keys))
	}
}

func TestCommaKeysAreOneKeyLocally(t *testing.T) {
	f, c := hostileFixture(t, service.Options{})
	// Separate keys, each exactly as sent.
	wantKeyRoundTrip(t, f, c, f.pingKey(t, "a,b"), "a,b", 1)
	wantKeyRoundTrip(t, f, c, f.pingKey(t, "a, b"), "a, b", 1)
	// Duplicate headers are joined with commas, as API Gateway joins them,
	// so they count against the same key as the single header.
	wantKeyRoundTrip(t, f, c, f.do(t, "GET", "/ping", "X-Client-Key", "a", "X-Client-Key", "b"), "a,b", 2)
	wantKeyRoundTrip(t, f, c, f.do(t, "GET", "/ping", "X-Client-Key", "a", "X-Client-Key", " b"), "a, b", 2)
	if got := c.tables(t); got.Windows != 2 {
		t.Errorf("%d counter rows, want 2 (a,b and a, b)", got.Windows)
	}
}

func TestSQLLookingKeysAreStoredLiterally(t *testing.T) {
	f, c := hostileFixture(t, service.Options{})
	keys := []string{
		"'; DROP TABLE rate_limit_windows; --",
		`"; DROP TABLE api_calls; --`,
		"' OR '1'='1",
		"alice' --",
		"Robert'); DELETE FROM rate_limit_windows WHERE ('1'='1",
		"1; UPDATE rate_limit_windows SET count = 0",
		"?1", "%", "_", `\`, "*/ SELECT 1 /*",
	}
	for _, key := range keys {
		wantKeyRoundTrip(t, f, c, f.pingKey(t, key), key, 1)
	}
	// The first key goes over its limit: its 429 quotes it literally.
	for range 3 {
		f.pingKey(t, keys[0])
	}
	p := wantProblem(t, f.pingKey(t, keys[0]), 429, service.TypeRateLimited, "/ping")
	if want := "Rate limit of 3 requests per 60s exceeded for key '" + keys[0] + "'."; p["detail"] != want {
		t.Errorf("429 detail %q, want %q", p["detail"], want)
	}
	// Both tables are intact and hold exactly what was counted.
	names := c.int(t, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('rate_limit_windows', 'api_calls')`)
	if names != 2 {
		t.Fatalf("%d of the 2 tables left", names)
	}
	if got, want := c.tables(t), (sqlitetest.Rows{Windows: int64(len(keys)), Calls: int64(len(keys)) + 2}); got != want {
		t.Errorf("tables %+v, want %+v", got, want)
	}
	if rows, count := c.stored(t, keys[0]); rows != 1 || count != 5 {
		t.Errorf("%q: %d rows, count %d; want 1 row with count 5", keys[0], rows, count)
	}
}

// TestFloodOfDistinctKeysIsPrunedTwoWindowsLater sends 5,000 distinct keys,
// from several goroutines at once, in one window: each adds exactly one
// counter row. Prune keeps them while their window is current or previous,
// and deletes them all once it ended more than a window ago, in several
// batches of sqlite.PruneBatch.
//
// The store runs in WAL mode, which the local server allows: the row counts
// and what Prune deletes do not depend on the journal, and WAL with
// synchronous=NORMAL skips the fsyncs that make 5,000 commits in the
// production DELETE mode take 8 s here (12 s with -race).
func TestFloodOfDistinctKeysIsPrunedTwoWindowsLater(t *testing.T) {
	const keys, workers = 5000, 8
	var mu sync.Mutex
	clock := now // t0+18s, in the window [t0, t0+60s)
	f, c := hostileFixtureIn(t, "WAL", service.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	setClock := func(t time.Time) { mu.Lock(); clock = t; mu.Unlock() }

	var wg sync.WaitGroup
	codes := make([]int, keys)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < keys; i += workers {
				r := httptest.NewRequest("GET", "/ping", nil)
				r.Header.Set("X-Client-Key", fmt.Sprintf("flood-%04d", i))
				rec := httptest.NewRecorder()
				f.api.ServeHTTP(rec, r)
				codes[i] = rec.Code
			}
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != 200 {
			t.Fatalf("key %d: %d, want 200", i, code)
		}
	}
	window := decide.FormatWindow(t0)
	if got := c.tables(t); got != (sqlitetest.Rows{Windows: keys, Calls: keys}) {
		t.Fatalf("tables %+v after %d distinct keys, want %d rows in each", got, keys, keys)
	}
	if n := c.int(t, `SELECT count(DISTINCT key) FROM rate_limit_windows WHERE window_start = ?1 AND count = 1`, window); n != keys {
		t.Fatalf("%d distinct keys with count 1 in window %s, want %d", n, window, keys)
	}

	prune := func(at time.Time) int64 {
		t.Helper()
		p, err := f.store.Prune(context.Background(), at, time.Time{})
		if err != nil {
			t.Fatalf("prune at %v: %v", at, err)
		}
		if p.Audit != 0 {
			t.Errorf("prune at %v deleted %d audit rows with no retention set", at, p.Audit)
		}
		return p.Windows
	}
	// One window on, the flood's window is the previous one: kept.
	if n := prune(now.Add(time.Minute)); n != 0 {
		t.Fatalf("prune one window on deleted %d rows, want 0", n)
	}
	// At t0+120s the flood's window ended exactly one window ago: kept.
	if n := prune(t0.Add(2 * time.Minute)); n != 0 {
		t.Fatalf("prune at the edge deleted %d rows, want 0", n)
	}
	// Two windows on, a live key in the current window stays; the flood goes.
	later := now.Add(2 * time.Minute)
	setClock(later)
	if w := f.pingKey(t, "live"); w.Code != 200 {
		t.Fatalf("live key: %d", w.Code)
	}
	if n := prune(later); n != keys {
		t.Fatalf("prune two windows on deleted %d rows, want %d", n, keys)
	}
	if got := c.tables(t); got != (sqlitetest.Rows{Windows: 1, Calls: keys + 1}) {
		t.Errorf("tables %+v after prune, want only the live key's row and every audit row", got)
	}
	if rows, count := c.int(t, `SELECT count(*) FROM rate_limit_windows WHERE key = 'live'`), c.int(t, `SELECT count FROM rate_limit_windows WHERE key = 'live'`); rows != 1 || count != 1 {
		t.Errorf("live key: %d rows, count %d", rows, count)
	}
}
