package main_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	_ "modernc.org/sqlite"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

// checkPolicy is a backend's quota: 50 units a key in 30 days (no window
// edge in sight), for POST /check.
const checkPolicy = `POLICIES=[{"name":"quota","limit":50,"window":"30d","routes":["POST /check"]}]`

// checkFromProcesses runs three local servers on one store (env), sends
// 60 checks of cost 3 for one key from twelve clients at once, and returns
// how many were allowed and denied.
func checkFromProcesses(t *testing.T, env ...string) (allowed, denied int) {
	var addrs []string
	for range 3 {
		addr, _, cmd := startLocalServer(t, t.TempDir(), append([]string{checkPolicy}, env...)...)
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		addrs = append(addrs, addr)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range 12 {
		wg.Go(func() {
			for range 5 {
				resp, err := http.Post("http://"+addrs[c%3]+"/check", "application/json", strings.NewReader(`{"key":"crowd","cost":3}`))
				if err != nil {
					t.Error(err)
					return
				}
				var b struct{ Allowed bool }
				err = json.NewDecoder(resp.Body).Decode(&b)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("check: %d %v", resp.StatusCode, err)
					return
				}
				mu.Lock()
				if b.Allowed {
					allowed++
				} else {
					denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return allowed, denied
}

// TestCheckIsExactAcrossProcessesOnOneFile: three local servers on one
// SQLite file, twelve clients checking one key at cost 3 against a quota
// of 50: exactly 16 pass (48 units; the 17th would make 51), every cost is
// counted, and every allowed check has one audit row, with its cost.
func TestCheckIsExactAcrossProcessesOnOneFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "shared.db")
	allowed, denied := checkFromProcesses(t, "DB_PATH="+db)
	if allowed != 16 || denied != 44 {
		t.Errorf("%d allowed, %d denied; want 16 and 44", allowed, denied)
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)") // the servers may still hold a lock (a prune)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var count, audited, costs int64
	if err := conn.QueryRow(`SELECT count FROM rate_limit_windows WHERE key = 'quota'||char(31)||'crowd'`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(`SELECT count(*), coalesce(sum(cost), 0) FROM api_calls WHERE key = 'crowd' AND route = 'POST /check'`).Scan(&audited, &costs); err != nil {
		t.Fatal(err)
	}
	if count != 180 || audited != 16 || costs != 48 {
		t.Errorf("stored count %d, %d audit rows costing %d; want 180 (60 × 3), 16, 48", count, audited, costs)
	}
}

// TestCheckIsExactAcrossProcessesOnOneTable: the same on one DynamoDB
// table (moto, one request at a time).
func TestCheckIsExactAcrossProcessesOnOneTable(t *testing.T) {
	m := dynamotest.StartT(t)
	table := dynamotest.CreateTable(t, m.Endpoint)
	allowed, denied := checkFromProcesses(t, append([]string{"STORE=dynamodb", "TABLE_NAME=" + table, "DYNAMODB_ENDPOINT=" + m.Endpoint}, dynamotest.Env...)...)
	if allowed != 16 || denied != 44 {
		t.Errorf("%d allowed, %d denied; want 16 and 44", allowed, denied)
	}
	c := dynamotest.Client(t, m.Endpoint)
	quota := limiter.Policy{Name: "quota", Limit: 50, Window: limiter.MaxWindow, Namespace: "quota"}
	start := decide.WindowStart(time.Now(), quota.Window)
	got, err := c.GetItem(context.Background(), &sdk.GetItemInput{TableName: &table, Key: dynamodb.CounterKey(quota, "crowd", start), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Query(context.Background(), &sdk.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: dynamodb.AuditPartition("crowd", start)}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Item["count"].(*types.AttributeValueMemberN).Value; n != "180" || len(q.Items) != 16 {
		t.Errorf("stored count %s, %d audit records; want 180 and 16", n, len(q.Items))
	}
}
