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

// tiersPolicy is a quota of 20 a key in 30 days (no window edge in
// sight), 40 on the pro plan, for POST /check.
const tiersPolicy = `POLICIES=[{"name":"quota","limit":20,"window":"30d","routes":["POST /check"],"tiers":{"pro":{"limit":40}}}]`

// tierLimits are tiersPolicy's limits by the tier /check names.
var tierLimits = map[string]int64{"default": 20, "pro": 40}

// tieredCheck is one /check answer: the tier it was decided under, and
// the count it was decided at when allowed (limit - remaining: a fixed
// window's count is exact while within the limit).
type tieredCheck struct {
	tier    string
	allowed bool
	count   int64
}

// tiersFromProcesses runs three local servers on one store (env), and
// sends 60 checks of one key from twelve clients at once, each client
// alternating between the default tier and pro.
func tiersFromProcesses(t *testing.T, env ...string) []tieredCheck {
	var addrs []string
	for range 3 {
		addr, _, cmd := startLocalServer(t, t.TempDir(), append([]string{tiersPolicy}, env...)...)
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		addrs = append(addrs, addr)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out []tieredCheck
	for c := range 12 {
		wg.Go(func() {
			for j := range 5 {
				tier := []string{"default", "pro"}[(c+j)%2]
				body := `{"key":"crowd"}`
				if tier == "pro" {
					body = `{"key":"crowd","tier":"pro"}`
				}
				resp, err := http.Post("http://"+addrs[(c+j)%3]+"/check", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				var b struct {
					Allowed  bool
					Policies []struct {
						Limit, Remaining int64
						Tier             string
					}
				}
				err = json.NewDecoder(resp.Body).Decode(&b)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || len(b.Policies) != 1 {
					t.Errorf("check: %d %v %+v", resp.StatusCode, err, b)
					return
				}
				p := b.Policies[0]
				if p.Tier != tier || p.Limit != tierLimits[tier] {
					t.Errorf("a check on %s was decided under tier %q, limit %d", tier, p.Tier, p.Limit)
				}
				mu.Lock()
				out = append(out, tieredCheck{tier: tier, allowed: b.Allowed, count: p.Limit - p.Remaining})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// checkTierBound checks the answers of tiersFromProcesses against the
// bound they must keep. Every attempt is counted, so the decisions of one
// key are the counts 1 to 60, one each, whatever the tiers; a decision at
// count n is allowed exactly when n is within the limit of the tier it
// was decided under. So: at most 20 allowed on the default tier and 40 in
// all (pro's limit), at least the 20 that came before any limit was
// reached, and of the denied, at most the 20 counts beyond 40 were on
// pro. Where the store answers with the count it decided at (exact: the
// SQLite store's transaction returns it), each allowed count is checked
// too: distinct, within its own tier's limit (never more allowed than the
// tier in force at that decision allows), and every count up to 20
// allowed, whatever its tier. (DynamoDB decides by a condition on its
// write and reads the count back after it, when others may have counted
// since.) It returns how many were allowed.
func checkTierBound(t *testing.T, answers []tieredCheck, exact bool) int {
	t.Helper()
	if len(answers) != 60 {
		t.Fatalf("%d answers, want 60", len(answers))
	}
	seen := map[int64]string{}
	allowed, allowedDefault, deniedPro := 0, 0, 0
	for _, a := range answers {
		switch {
		case !a.allowed && a.tier == "pro":
			deniedPro++
		case a.allowed && a.tier == "default":
			allowedDefault++
		}
		if a.allowed {
			allowed++
		}
		if a.allowed && exact {
			if a.count < 1 || a.count > tierLimits[a.tier] {
				t.Errorf("allowed at count %d under %s, whose limit is %d", a.count, a.tier, tierLimits[a.tier])
			}
			if other, ok := seen[a.count]; ok {
				t.Errorf("two decisions at count %d (%s and %s): an increment was lost", a.count, other, a.tier)
			}
			seen[a.count] = a.tier
		}
	}
	for n := int64(1); n <= 20 && exact; n++ {
		if _, ok := seen[n]; !ok {
			t.Errorf("the decision at count %d, within every tier's limit, was denied", n)
		}
	}
	if allowed < 20 || allowed > 40 || allowedDefault > 20 || deniedPro > 20 {
		t.Errorf("%d allowed, %d of them on the default tier, %d denied on pro; want 20 to 40 (pro's limit), at most 20 (the default's), at most 20 (the counts beyond 40)",
			allowed, allowedDefault, deniedPro)
	}
	t.Logf("%d allowed: the first 20, whatever their tiers, and %d pro checks among counts 21 to 40", allowed, allowed-20)
	return allowed
}

// TestTiersAreExactAcrossProcessesOnOneFile: three local servers on one
// SQLite file, one key whose checks alternate between two tiers: each
// decision applies the limit of its own tier to the one count, and the
// file holds every attempt and one audit row per allowed check.
func TestTiersAreExactAcrossProcessesOnOneFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "shared.db")
	allowed := checkTierBound(t, tiersFromProcesses(t, "DB_PATH="+db), true)
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)") // the servers may still hold a lock (a prune)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var count, audited int64
	if err := conn.QueryRow(`SELECT count FROM rate_limit_windows WHERE key = 'quota'||char(31)||'crowd'`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(`SELECT count(*) FROM api_calls WHERE key = 'crowd'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if count != 60 || audited != int64(allowed) {
		t.Errorf("stored count %d, %d audit rows; want 60 and %d", count, audited, allowed)
	}
}

// TestTiersAreExactAcrossProcessesOnOneTable: the same on one DynamoDB
// table (moto, one request at a time).
func TestTiersAreExactAcrossProcessesOnOneTable(t *testing.T) {
	m := dynamotest.StartT(t)
	table := dynamotest.CreateTable(t, m.Endpoint)
	allowed := checkTierBound(t, tiersFromProcesses(t, append([]string{"STORE=dynamodb", "TABLE_NAME=" + table, "DYNAMODB_ENDPOINT=" + m.Endpoint}, dynamotest.Env...)...), false)
	quota := limiter.Policy{Name: "quota", Limit: 20, Window: limiter.MaxWindow, Namespace: "quota"}
	start := decide.WindowStart(time.Now(), quota.Window)
	c := dynamotest.Client(t, m.Endpoint)
	got, err := c.GetItem(context.Background(), &sdk.GetItemInput{TableName: &table, Key: dynamodb.CounterKey(quota, "crowd", start), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Query(context.Background(), &sdk.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: dynamodb.AuditPartition("crowd", start)}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Item["count"].(*types.AttributeValueMemberN).Value; n != "60" || len(q.Items) != allowed {
		t.Errorf("stored count %s, %d audit records; want 60 and %d", n, len(q.Items), allowed)
	}
}
