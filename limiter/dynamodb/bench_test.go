package dynamodb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
)

// Benchmarks of the DynamoDB store's requests against moto_server on
// loopback. Moto is a Python emulation serving one request at a time: its
// speed is not DynamoDB's (single-digit milliseconds per request within a
// region, per AWS), only the requests per decision carry over.
//
//	go test -run '^$' -bench . -benchtime 300x ./limiter/dynamodb/

// BenchmarkDecisionAllowed is an allowed decision: a read, then a
// transaction.
func BenchmarkDecisionAllowed(b *testing.B) {
	s := open(b, dynamotest.Endpoint(b), dynamotest.CreateTable(b, dynamotest.Endpoint(b)))
	p := limiter.Policy{Name: "ping", Limit: 1 << 40, Window: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	b.ResetTimer()
	for i := range b.N {
		if d, err := s.Allow(context.Background(), storetest.One(p, fmt.Sprint("client-", i%8), now, "", "r")); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkDecisionRejected is a rejected one: a read, then a transaction
// that counts the attempt.
func BenchmarkDecisionRejected(b *testing.B) {
	s := open(b, dynamotest.Endpoint(b), dynamotest.CreateTable(b, dynamotest.Endpoint(b)))
	p := limiter.Policy{Name: "ping", Limit: 1, Window: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	s.Allow(context.Background(), storetest.One(p, "abuser", now, "", ""))
	b.ResetTimer()
	for range b.N {
		if d, err := s.Allow(context.Background(), storetest.One(p, "abuser", now, "", "")); err != nil || d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkUsage is the /status read: one GetItem.
func BenchmarkUsage(b *testing.B) {
	s := open(b, dynamotest.Endpoint(b), dynamotest.CreateTable(b, dynamotest.Endpoint(b)))
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	s.Allow(context.Background(), storetest.One(p, "k", now, "", ""))
	b.ResetTimer()
	for range b.N {
		if u, err := s.Usage(context.Background(), p, "k", now); err != nil || u.Count != 1 {
			b.Fatal(u, err)
		}
	}
}
