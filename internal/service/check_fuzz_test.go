// Fuzz it for real with:
//
//	go test -run='^$' -fuzz=FuzzCheckBody -fuzztime=100000x ./limiter/httpapi/

package service_test

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
)

// FuzzCheckBody sends arbitrary bodies to POST /check. The answer is a 200
// with a decision or a 400 problem, never anything else; a 400 writes
// nothing; a 200 adds the cost it reports to the counter of each policy it
// reports, for the key it reports, and names every policy it was asked to
// check (or every policy of POST /check). The units stored grow by exactly
// what the answers say.
func FuzzCheckBody(f *testing.F) {
	for _, seed := range []string{
		`{"key": "user-42", "cost": 3, "policies": ["api", "daily"]}`, `{"key": "k"}`, `{"key": "k", "cost": 100}`,
		`{"key": "k", "cost": 1001}`, `{"key": "k", "cost": 0}`, `{"key": "k", "cost": 1.5}`, `{"key": "k", "cost": "2"}`,
		`{"key": "k", "cost": 1e2}`, `{"key": "k", "cost": -3}`, `{"key": "k", "cost": 9223372036854775808}`,
		`{"key": "k", "policies": []}`, `{"key": "k", "policies": ["api", "api"]}`, `{"key": "k", "policies": ["nope"]}`,
		`{"key": "k", "policies": [null]}`, `{"key": null}`, `{"key": ""}`, `{"key": " k "}`, `{"key": "a\u0000b"}`,
		`{"key": "\ud800"}`, `{"key": "` + strings.Repeat("x", 257) + `"}`, `{"key": "k", "extra": true}`,
		`{"Key": "k"}`, `{"key": "k"}{"key": "k"}`, `{"key": "k"} `, `[]`, `null`, `""`, `{`, ``, `{"key": "k", "key": "j"}`,
		`{"key": "k", "policies": ["trial"], "cost": 2}`, `{"key": "k", "cost": 1.0000000000000001}`, `{"key": "k", "cost": 1.00e2}`,
		`{"key": "k", "cost": 1e-400}`, `{"key": "k", "cost": 1e9999999999999999999}`, `{"key": "k", "cost": 1e9223372036854775807}`, `{"key": "k", "policies": null}`, `{"key": "k", "cost": null}`,
		`{"key": "k", "tier": "pro"}`, `{"key": "k", "tier": null}`, `{"key": "k", "tier": 1}`, `{"key": "k", "tier": "\u0000` + strings.Repeat("x", 300) + `"}`,
	} {
		f.Add(seed)
	}
	c := openCheckedStore(f)
	api := lambdatest.NewAPI(f, service.Options{Store: c.store, Rules: checkRules(), Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	units := func(tb testing.TB) int64 {
		return c.int(tb, `SELECT coalesce(sum(count), 0) FROM rate_limit_windows`)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before, rows := units(t), c.tables(t)
		r := httptest.NewRequest("POST", "/check", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		switch w.Code {
		case 400:
			var p map[string]any
			if json.Unmarshal(w.Body.Bytes(), &p) != nil || w.Header().Get("Content-Type") != "application/problem+json" || p["detail"] == "" {
				t.Fatalf("400 without a problem: %s", w.Body)
			}
			if units(t) != before || c.tables(t) != rows {
				t.Fatalf("a refused check wrote: %q", body)
			}
		case 200:
			var a checkAnswer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatalf("200 body %s: %v", w.Body, err)
			}
			if limiter.ValidKey(a.Key) != nil || a.Cost < 1 || len(a.Policies) == 0 {
				t.Fatalf("answer %+v for %q", a, body)
			}
			if got, want := units(t)-before, a.Cost*int64(len(a.Policies)); got != want {
				t.Fatalf("%q: stored units grew by %d, want the cost %d times %d policies", body, got, a.Cost, len(a.Policies))
			}
		default:
			t.Fatalf("%q: status %d: %s", body, w.Code, w.Body)
		}
	})
}
