package dynamodb_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

// TestMain runs one moto_server for the package's tests, unless this
// process is a deciding worker that TestKillNineBetweenWrites starts.
func TestMain(m *testing.M) {
	testproc.RunRole(map[string]func(string){roleWorker: decidingWorker})
	dynamotest.Main(m)
}

// retention is the audit retention the suite's stores run with: DynamoDB
// decides an audit record's expiry when it writes it.
const retention = 3 * time.Hour

func open(t testing.TB, endpoint, table string) *dynamodb.Store {
	t.Helper()
	return openWithin(t, endpoint, table, 5*time.Second)
}

// openWithin is open with a busy timeout of its own, for a test that waits
// until the store gives up: it waits that long.
func openWithin(t testing.TB, endpoint, table string, busy time.Duration) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.Open(context.Background(), dynamodb.Config{
		Table: table, Endpoint: endpoint,
		BusyTimeout: busy, AuditRetention: retention,
	}, dynamotest.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func n(v types.AttributeValue) int64 {
	x, _ := v.(*types.AttributeValueMemberN)
	if x == nil {
		return 0
	}
	i, _ := strconv.ParseInt(x.Value, 10, 64)
	return i
}

func s(v types.AttributeValue) string {
	x, _ := v.(*types.AttributeValueMemberS)
	if x == nil {
		return ""
	}
	return x.Value
}

// scan reads the whole table.
func scan(t *testing.T, c *sdk.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := sdk.NewScanPaginator(c, &sdk.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
	}
	return items
}

// TestConformance runs the limiter's behaviour suite on a DynamoDB table in
// moto_server.
func TestConformance(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Exclusive(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Instance {
			table := dynamotest.CreateTable(t, endpoint)
			c := dynamotest.Client(t, endpoint)
			return storetest.Instance{
				Store:   open(t, endpoint, table),
				Another: func(t *testing.T) limiter.Store { return open(t, endpoint, table) },
				Stored: func(t *testing.T, p limiter.Policy, key string, start time.Time) (int64, []storetest.Audit) {
					ctx := context.Background()
					got, err := c.GetItem(ctx, &sdk.GetItemInput{TableName: &table, Key: dynamodb.CounterKey(p, key, start), ConsistentRead: aws.Bool(true)})
					if err != nil {
						t.Fatal(err)
					}
					q, err := c.Query(ctx, &sdk.QueryInput{
						TableName:                 &table,
						KeyConditionExpression:    aws.String("pk = :pk"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: dynamodb.AuditPartition(key, start)}},
						ConsistentRead:            aws.Bool(true),
					})
					if err != nil {
						t.Fatal(err)
					}
					var audit []storetest.Audit
					for _, it := range q.Items {
						audit = append(audit, storetest.Audit{CalledAt: s(it["called_at"]), Route: s(it["route"]), RequestID: s(it["request_id"]), Cost: n(it["cost"])})
					}
					return n(got.Item["count"]), audit
				},
				// DynamoDB's time to live, emulated: moto does not expire
				// items, so delete those whose expires_at has passed.
				Expire: func(t *testing.T, now, _ time.Time) {
					for _, it := range scan(t, c, table) {
						if e, ok := it["expires_at"]; ok && n(e) < now.Unix() {
							if _, err := c.DeleteItem(context.Background(), &sdk.DeleteItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
								t.Fatal(err)
							}
						}
					}
				},
			}
		},
		Broken: func(t *testing.T) limiter.Store { return open(t, endpoint, "no-such-table") },
	})
}

// TestItemsCarryTheirExpiry checks the time-to-live attribute that replaces
// pruning: a counter expires one window after its window ends, an audit
// record AUDIT_RETENTION after it was made, and without a retention never.
func TestItemsCarryTheirExpiry(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 45, 0, time.UTC)
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	if _, err := open(t, endpoint, table).Allow(ctx, storetest.One(p, "kept", now, "", "r1")); err != nil {
		t.Fatal(err)
	}
	forever, err := dynamodb.Open(ctx, dynamodb.Config{Table: table, Endpoint: endpoint}, dynamotest.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forever.Allow(ctx, storetest.One(p, "forever", now, "", "r2")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range scan(t, dynamotest.Client(t, endpoint), table) {
		e := "none"
		if v, ok := it["expires_at"]; ok {
			e = time.Unix(n(v), 0).UTC().Format(time.RFC3339)
		}
		// U+001F separates the parts of a key: shown as ␟.
		got = append(got, strings.ReplaceAll(s(it["pk"]), "\x1f", "␟")+" "+s(it["sk"])[:6]+" expires "+e)
	}
	sort.Strings(got)
	want := []string{
		"call␟forever␟2026-01-01T00:00:00Z 2026-0 expires none",
		"call␟kept␟2026-01-01T00:00:00Z 2026-0 expires 2026-01-01T03:00:45Z",
		"counter␟forever window expires 2026-01-01T00:02:00Z",
		"counter␟kept window expires 2026-01-01T00:02:00Z",
	}
	if len(got) != len(want) {
		t.Fatalf("items:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d: %q, want %q", i, got[i], want[i])
		}
	}
}
