package service_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// shardFaults are ways the file of a shard other than 0 can be unusable
// when a call first needs it (a cold start opens shard 0 alone): path is
// that shard's file, other the path of another shard whose file exists.
var shardFaults = []struct {
	name  string
	apply func(t *testing.T, path, other string)
}{
	{"not a database", func(t *testing.T, path, _ string) {
		if err := os.WriteFile(path, []byte("this is not a database, just some bytes of text that go on for a while"), 0o644); err != nil {
			t.Fatal(err)
		}
	}},
	{"another shard's file", func(t *testing.T, path, other string) {
		b, err := os.ReadFile(other)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestAnUnusableShardGetsTheFailModesAnswer: with four shards, a key whose
// shard (not 0) is unusable is answered, on every route that reaches the
// store, as the fail mode says, with a problem (503) or a degraded 200,
// never a panic or a bare 500; keys of the other shards are served.
func TestAnUnusableShardGetsTheFailModesAnswer(t *testing.T) {
	key, fine := keyOfShard(t, 1, 4), keyOfShard(t, 2, 4)
	for _, f := range shardFaults {
		for _, mode := range []limiter.FailMode{limiter.FailClosed, limiter.FailOpen} {
			t.Run(f.name+"/"+string(mode), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "rl.db")
				// A busy timeout that a loaded machine's opens fit in: it
				// also bounds opening a file (a CI run under load once
				// took more than 200 ms to open a shard).
				cfg := sqlite.Config{Path: path, Shards: 4, BusyTimeout: 3 * time.Second}
				made := sqlitetest.Open(t, cfg)
				sqlitetest.OpenShards(t, made)
				made.Close()
				os.Remove(sqlite.ShardPath(path, 1))
				f.apply(t, sqlite.ShardPath(path, 1), sqlite.ShardPath(path, 3))

				fx := newAdmin(t, service.Options{Store: sqlitetest.Open(t, cfg), FailMode: mode})
				send := func(method, target, body string, header ...string) *httptest.ResponseRecorder {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					r := httptest.NewRequestWithContext(ctx, method, target, nil)
					if body != "" {
						r = httptest.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
					}
					for i := 0; i+1 < len(header); i += 2 {
						r.Header.Set(header[i], header[i+1])
					}
					r.Header.Set("X-Test-Principal", "arn:aws:iam::123456789012:user/ops")
					w := httptest.NewRecorder()
					fx.api.ServeHTTP(w, r)
					return w
				}
				if w := send("GET", "/ping", "", "X-Client-Key", fine); w.Code != 200 {
					t.Errorf("a key of a good shard: %d %s", w.Code, w.Body)
				}
				w := send("GET", "/ping", "", "X-Client-Key", key)
				if mode == limiter.FailClosed {
					wantProblem(t, w, 503, service.TypeStoreUnavailable, "/ping")
				} else if body := decode(t, w); w.Code != 200 || body["degraded"] != true {
					t.Errorf("/ping, fail open: %d %v, want 200 degraded", w.Code, body)
				}
				wantProblem(t, send("GET", "/status?key="+key, ""), 503, service.TypeStoreUnavailable, "/status")
				for _, c := range []struct{ method, target, body string }{
					{"PUT", "/admin/overrides/ping/" + key, `{"limit": 5}`},
					{"GET", "/admin/overrides/ping/" + key, ""},
					{"DELETE", "/admin/overrides/ping/" + key, ""},
					{"DELETE", "/admin/counters/ping/" + key, ""},
				} {
					wantProblem(t, send(c.method, c.target, c.body), 503, service.TypeStoreUnavailable, c.target)
				}
			})
		}
	}
}

// keyOfShard is a client key that falls into shard i of n.
func keyOfShard(t *testing.T, i, n int) string {
	t.Helper()
	for c := 'a'; c <= 'z'; c++ {
		for d := 'a'; d <= 'z'; d++ {
			if k := string([]rune{c, d}); sqlite.ShardOf(k, n) == i {
				return k
			}
		}
	}
	t.Fatalf("no two-letter key falls into shard %d of %d", i, n)
	return ""
}
