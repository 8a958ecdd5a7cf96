package awslambda_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
)

// TestOneWriteTransactionPerPingNonePerStatus counts committed write
// transactions through the Lambda handler: each /ping, allowed or rejected,
// is exactly one, and /status is none.
func TestOneWriteTransactionPerPingNonePerStatus(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	ping := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	status := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "status.json")
	f.invoke(t, ping) // the first decision of a process also reads the schema

	before := sqlitetest.ChangeCounter(t, f.store.Path())
	codes := map[int]int{}
	for range 10 {
		codes[f.invoke(t, ping).StatusCode]++
	}
	if got := sqlitetest.ChangeCounter(t, f.store.Path()) - before; got != 10 {
		t.Errorf("10 pings (%v) committed %d write transactions, want 10", codes, got)
	}
	if codes[200] != 2 || codes[429] != 8 {
		t.Errorf("answers %v, want 2 allowed and 8 rejected", codes)
	}

	before = sqlitetest.ChangeCounter(t, f.store.Path())
	for range 10 {
		if resp := f.invoke(t, status); resp.StatusCode != 200 {
			t.Fatalf("status: %d %s", resp.StatusCode, resp.Body)
		}
	}
	if got := sqlitetest.ChangeCounter(t, f.store.Path()) - before; got != 0 {
		t.Errorf("10 status reads committed %d write transactions, want 0", got)
	}
}
