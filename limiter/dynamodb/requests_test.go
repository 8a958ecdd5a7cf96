package dynamodb_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

// ops are the operations of calls, in order.
func ops(calls []dynamotest.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Op)
	}
	return out
}

// decideThrough makes one decision of a through proxy and returns it with
// the operations it sent.
func decideThrough(t *testing.T, proxy *dynamotest.Proxy, s *dynamodb.Store, a limiter.Attempt) (limiter.Outcome, []string) {
	t.Helper()
	before := len(proxy.Calls())
	o, err := s.Allow(context.Background(), a)
	if err != nil {
		t.Fatalf("allow: %v", err)
	}
	return o, ops(proxy.Calls()[before:])
}

var (
	read     = "BatchGetItem"
	transact = "TransactWriteItems"
)

// TestTwoRequestsPerDecision counts, through the proxy, the requests of
// one uncontended decision: a consistent read of everything it depends on
// (overrides, the current windows, previous windows, buckets), then one
// transaction, allowed or denied. A denial under GCRA alone moves nothing
// and writes nothing. The store used to send three for an allowed
// decision and four for a denied one (a cancelled transaction, the
// denial's, then a read of the counts back). The counts each decision
// reports are exact: what it read, plus its cost.
func TestTwoRequestsPerDecision(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)
	fixed := limiter.Policy{Name: "fixed", Limit: 1, Window: time.Hour, Namespace: "fixed"}
	sliding := limiter.Policy{Name: "sliding", Limit: 1, Window: time.Hour, Namespace: "sliding", Algorithm: limiter.Sliding}
	gcra := limiter.Policy{Name: "gcra", Limit: 1, Window: time.Hour, Namespace: "gcra", Algorithm: limiter.GCRA}
	roomy := limiter.Policy{Name: "roomy", Limit: 10, Window: time.Hour, Namespace: "roomy", Algorithm: limiter.GCRA}
	daily := limiter.Policy{Name: "daily", Limit: 100, Window: 24 * time.Hour, Namespace: "daily"}
	for _, tc := range []struct {
		name     string
		policies []limiter.Policy
		denied   []string // the requests of the denied attempt
	}{
		{"fixed", []limiter.Policy{fixed}, []string{read, transact}},
		{"sliding", []limiter.Policy{sliding}, []string{read, transact}},
		{"gcra", []limiter.Policy{gcra}, []string{read}},
		{"three policies", []limiter.Policy{fixed, daily, roomy}, []string{read, transact}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := dynamotest.NewProxy(t, endpoint)
			s := open(t, proxy.URL, table)
			a := limiter.Attempt{Now: t0.Add(30 * time.Minute), Route: "GET /ping"}
			for _, p := range tc.policies {
				a.Charges = append(a.Charges, limiter.Charge{Policy: p, Key: tc.name})
			}
			for i, want := range [][]string{{read, transact}, tc.denied} {
				a.RequestID = fmt.Sprint(i)
				o, got := decideThrough(t, proxy, s, a)
				if o.Allowed != (i == 0) {
					t.Fatalf("attempt %d: allowed %v", i+1, o.Allowed)
				}
				if !slices.Equal(got, want) {
					t.Errorf("attempt %d (allowed %v): requests %v, want %v", i+1, o.Allowed, got, want)
				}
				for j, d := range o.Decisions {
					if p := tc.policies[j]; p.Algorithm != limiter.GCRA && d.Count != int64(i+1) {
						t.Errorf("attempt %d: %s reports a count of %d, want %d", i+1, p.Name, d.Count, i+1)
					}
				}
			}
			if count, audit := stored(t, endpoint, table, tc.policies[0], tc.name, a.Now); tc.policies[0].Algorithm != limiter.GCRA && (count != 2 || audit != 1) {
				t.Errorf("stored count %d with %d audit records, want 2 and 1", count, audit)
			}
		})
	}
}

// TestARaceIsDecidedAgainFromTheCancellation: between a decision's read
// and its transaction, another process counts an attempt of the same key.
// Under a limit of 5 that leaves room: the transaction's condition holds,
// two requests, and the count the decision tells is the least it can be
// (1, its own), the stored one exact (2). Under a limit of 1 the race
// took the last unit: the condition fails, and the cancellation carries
// the counter as it is now (moto fills the reason's Item as DynamoDB
// documents, with ReturnValuesOnConditionCheckFailure ALL_OLD), so the
// store decides again from it, without another read: denied, and
// counted. A GCRA bucket that moved is taken from the cancellation the
// same way, and the attempt moves it on from there. Without the items
// (StripItems), the store reads again, and is as exact.
func TestARaceIsDecidedAgainFromTheCancellation(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)
	direct := open(t, endpoint, table)
	roomy := limiter.Policy{Name: "ping", Limit: 5, Window: time.Hour}
	tight := limiter.Policy{Name: "ping", Limit: 1, Window: time.Hour}
	for _, tc := range []struct {
		name    string
		p       limiter.Policy
		strip   bool
		allowed bool
		told    int64 // the count the decision tells
		want    []string
	}{
		{"room left", roomy, false, true, 1, []string{read, transact}},
		{"the race took the last unit", tight, false, false, 2, []string{read, transact, transact}},
		{"gcra", limiter.Policy{Name: "tokens", Limit: 5, Window: time.Hour, Namespace: "tokens", Algorithm: limiter.GCRA}, false, true, 0, []string{read, transact, transact}},
		{"no items in the cancellation", tight, true, false, 2, []string{read, transact, read, transact}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := dynamotest.NewProxy(t, endpoint)
			proxy.StripItems(tc.strip)
			s := open(t, proxy.URL, table)
			key := tc.name
			proxy.Before(transact, func() {
				if _, err := direct.Allow(context.Background(), storetest.One(tc.p, key, t0, "GET /ping", "racer")); err != nil {
					t.Error(err)
				}
			})
			o, got := decideThrough(t, proxy, s, storetest.One(tc.p, key, t0, "GET /ping", "r"))
			if o.Allowed != tc.allowed || !slices.Equal(got, tc.want) {
				t.Errorf("allowed %v after requests %v; want %v after %v", o.Allowed, got, tc.allowed, tc.want)
			}
			if tc.p.Algorithm == limiter.GCRA {
				if u, err := direct.Usage(context.Background(), tc.p, key, t0); err != nil || u.Remaining != 3 || o.Decisions[0].Remaining != 3 {
					t.Errorf("usage %+v, %v, told %d remaining; want the bucket moved twice, 3 left", u, err, o.Decisions[0].Remaining)
				}
				return
			}
			if d := o.Decisions[0]; d.Count != tc.told {
				t.Errorf("told a count of %d, want %d", d.Count, tc.told)
			}
			audits := int64(1)
			if tc.allowed {
				audits = 2
			}
			if count, audit := stored(t, endpoint, table, tc.p, key, t0); count != 2 || audit != audits {
				t.Errorf("stored count %d with %d audit records, want 2 and %d", count, audit, audits)
			}
		})
	}
}

// TestALostCancellationIsRepeatedThenDecidedAgain: a race takes the last
// unit, which cancels a decision's transaction, and the answer is lost.
// The store cannot know the call was not applied, so it repeats it, token
// and all; the repeat is cancelled too (DynamoDB would answer a token it
// had applied with success), and only then does a new call, with a new
// token, count the denied attempt. Each attempt counted once, the racer's
// audited once.
func TestALostCancellationIsRepeatedThenDecidedAgain(t *testing.T) {
	t.Parallel()
	endpoint, table, proxy, s := openBehindProxy(t)
	direct := open(t, endpoint, table)
	p := limiter.Policy{Name: "ping", Limit: 1, Window: time.Hour}
	proxy.Before(transact, func() {
		if _, err := direct.Allow(context.Background(), storetest.One(p, "k", t0, "GET /ping", "racer")); err != nil {
			t.Error(err)
		}
	})
	proxy.Lose(transact, 1)
	o, err := s.Allow(context.Background(), storetest.One(p, "k", t0, "GET /ping", "r"))
	if err != nil || o.Allowed || o.Decisions[0].Count != 2 {
		t.Fatalf("allow = %+v, %v; want denied with a count of 2", o, err)
	}
	calls := proxy.Calls()
	checkTokens(t, calls)
	var tokens []string
	for _, c := range calls {
		if c.Op == transact {
			tokens = append(tokens, c.Token)
		}
	}
	if len(tokens) != 3 || tokens[0] != tokens[1] || tokens[1] == tokens[2] {
		t.Errorf("tokens %v: want the lost call, its repeat with the same token, then a new call", tokens)
	}
	if count, audit := stored(t, endpoint, table, p, "k", t0); count != 2 || audit != 1 {
		t.Errorf("stored count %d with %d audit records, want 2 and 1", count, audit)
	}
}

// TestContendedDecisionsCountExactly: sixteen goroutines on two store
// handles decide one key at once, eight attempts each, under a limit of
// 20, with some answers lost. Every attempt is counted once, exactly 20
// are allowed, each with its audit record; each decision read once (a
// race for the last units is decided again from the cancellation, never
// by reading again), and sent at most two transactions besides the
// repeats of lost answers: its own, and the denial's after a race filled
// the counter.
func TestContendedDecisionsCountExactly(t *testing.T) {
	t.Parallel()
	endpoint, table, proxy, s := openBehindProxyOn(t, dynamotest.Exclusive(t))
	stores := []*dynamodb.Store{s, open(t, proxy.URL, table)}
	p := limiter.Policy{Name: "ping", Limit: 20, Window: time.Hour}
	const workers, each = 16, 8
	proxy.Lose(transact, 10)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				o, err := stores[w%2].Allow(context.Background(), storetest.One(p, "hot", t0, "GET /ping", fmt.Sprint(w, "-", i)))
				if err != nil {
					t.Error(err)
					return
				}
				if o.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	count, audit := stored(t, endpoint, table, p, "hot", t0)
	if count != workers*each || audit != p.Limit || allowed != int(p.Limit) {
		t.Errorf("count %d, audit records %d, allowed %d; want %d, %d, %d", count, audit, allowed, workers*each, p.Limit, p.Limit)
	}
	reads, lost, sent := 0, 0, 0
	for _, c := range proxy.Calls() {
		switch {
		case c.Op == read || c.Op == "GetItem":
			reads++
		case c.Lost:
			lost++ // its repeat is the same call
		default:
			sent++
		}
	}
	if reads != workers*each {
		t.Errorf("%d reads for %d decisions, want one each", reads, workers*each)
	}
	if lost == 0 {
		t.Error("no answer was lost: the test did not test")
	}
	if most := 2 * workers * each; sent > most {
		t.Errorf("%d transactions for %d decisions, want at most %d", sent, workers*each, most)
	}
	t.Logf("%d decisions: %d reads, %d transactions (%d lost answers besides)", workers*each, reads, sent, lost)
}
