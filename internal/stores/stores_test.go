package stores_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter/dynamodb"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

func TestOpenPicksTheConfiguredStore(t *testing.T) {
	ctx := context.Background()
	s, err := stores.Open(ctx, stores.Config{Path: filepath.Join(t.TempDir(), "rl.db")})
	if _, ok := s.(*sqlite.Store); !ok || err != nil {
		t.Errorf("default store = %T, %v; want SQLite", s, err)
	}
	s.Close()
	t.Setenv("AWS_REGION", "us-east-1")
	s, err = stores.Open(ctx, stores.Config{Kind: stores.DynamoDB, Table: "counters"})
	if _, ok := s.(*dynamodb.Store); !ok || err != nil {
		t.Errorf("STORE=dynamodb store = %T, %v; want DynamoDB", s, err)
	}
	// A store that cannot be used is nil, not a nil pointer in an interface.
	if s, err := stores.Open(ctx, stores.Config{Path: t.TempDir()}); s != nil || err == nil {
		t.Errorf("a directory as the database = %v, %v; want no store", s, err)
	}
	if s, err := stores.Open(ctx, stores.Config{Kind: "redis"}); s != nil || err == nil || !strings.Contains(err.Error(), "no redis store") {
		t.Errorf("unknown kind = %v, %v", s, err)
	}
}
