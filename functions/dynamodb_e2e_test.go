//go:build linux

package functions_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

// dynamoEnv is the configuration of a function on the DynamoDB store in
// moto, as the template would set it in AWS (which provides credentials).
func dynamoEnv(endpoint, table string, more ...string) []string {
	return append(append([]string{"STORE=dynamodb", "TABLE_NAME=" + table, "DYNAMODB_ENDPOINT=" + endpoint}, dynamotest.Env...), more...)
}

// TestDynamoDBStoreThroughTheEmulator runs the ping and status functions on
// the DynamoDB store, in moto_server, through the Lambda runtime API: the
// same answers as on SQLite, and with three environments at once, exact
// counts and audit records.
func TestDynamoDBStoreThroughTheEmulator(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)
	ping := startEmulator(t, "ping", dynamoEnv(endpoint, table, "RATE_LIMIT=3", "WINDOW_SECONDS="+longWindow)...)
	status := startEmulator(t, "status", dynamoEnv(endpoint, table, "RATE_LIMIT=3", "WINDOW_SECONDS="+longWindow)...)

	event := lambdatest.Event(t, "ping.json")
	for i, want := range []int{200, 200, 200, 429} {
		resp := mustHTTP(t, ping, event)
		if resp.StatusCode != want {
			t.Fatalf("ping %d: %d %s, want %d", i+1, resp.StatusCode, resp.Body, want)
		}
		if lambdatest.Header(resp, "RateLimit-Policy") != `"ping";q=3;w=2592000` || lambdatest.Header(resp, "X-RateLimit-Remaining") != strconv.Itoa(max(2-i, 0)) {
			t.Errorf("ping %d: headers %v", i+1, resp.Headers)
		}
		if want == 429 && (lambdatest.Header(resp, "Retry-After") == "" || lambdatest.JSONBody(t, resp)["detail"] != "Rate limit of 3 requests per 2592000s exceeded for key 'alice'.") {
			t.Errorf("429: %v %s", resp.Headers, resp.Body)
		}
	}
	for range 2 { // reading does not count
		resp := mustHTTP(t, status, lambdatest.Event(t, "status.json"))
		if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["count"] != float64(4) || b["remaining"] != float64(0) {
			t.Fatalf("status: %d %v, want count 4, remaining 0", resp.StatusCode, b)
		}
	}

	// Three environments, 60 invocations of one key, limit 20.
	const limit, requests = 20, 60
	envs := []*emulator{
		startEmulator(t, "ping", dynamoEnv(endpoint, table, "RATE_LIMIT="+strconv.Itoa(limit), "WINDOW_SECONDS="+longWindow)...),
		startEmulator(t, "ping", dynamoEnv(endpoint, table, "RATE_LIMIT="+strconv.Itoa(limit), "WINDOW_SECONDS="+longWindow)...),
		startEmulator(t, "ping", dynamoEnv(endpoint, table, "RATE_LIMIT="+strconv.Itoa(limit), "WINDOW_SECONDS="+longWindow)...),
	}
	crowd := withKey(t, lambdatest.Event(t, "ping.json"), "crowd")
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			resp, err := envs[i%len(envs)].invokeHTTP(crowd)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[200] != limit || statuses[429] != requests-limit {
		t.Errorf("statuses %v, want %d × 200 and %d × 429", statuses, limit, requests-limit)
	}
	c := dynamotest.Client(t, endpoint)
	ctx := context.Background()
	p := limiter.Policy{Name: "ping", Limit: limit, Window: 2592000 * time.Second}
	start := decide.WindowStart(time.Now(), p.Window)
	got, err := c.GetItem(ctx, &sdk.GetItemInput{TableName: &table, Key: dynamodb.CounterKey(p, "crowd", start), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var count int64
	if v, ok := got.Item["count"].(*types.AttributeValueMemberN); ok {
		count, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	q, err := c.Query(ctx, &sdk.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: dynamodb.AuditPartition("crowd", start)}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if count != requests || len(q.Items) != limit {
		t.Errorf("stored count %d with %d audit records, want %d and %d", count, len(q.Items), requests, limit)
	}
}

// TestLeanBuildRefusesTheDynamoDBStore runs the ping function built with
// -tags nodynamodb, which leaves the AWS SDK out, configured for DynamoDB:
// it must fail at init saying why, not start without its store.
func TestLeanBuildRefusesTheDynamoDBStore(t *testing.T) {
	t.Parallel()
	e := startEmulator(t, "ping-nodynamodb", "STORE=dynamodb", "TABLE_NAME=t")
	status, body, err := e.invoke(lambdatest.Event(t, "ping.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fnErr struct {
		ErrorType string `json:"errorType"`
	}
	json.Unmarshal(body, &fnErr)
	if status == 200 && fnErr.ErrorType == "" || strings.Contains(string(body), `"statusCode":200`) {
		t.Fatalf("invocation: %d %s, want an init error", status, body)
	}
	// Stopped first: the emulator copies the function's output on its own
	// time, and may answer the invocation before the line is in.
	e.stop()
	if !strings.Contains(e.logs.String(), "this build has no dynamodb store") {
		t.Errorf("the init error does not say why:\n%s", e.logs)
	}
	// And the same build serves SQLite as ever.
	sqliteEnv := startEmulator(t, "ping-nodynamodb", "DB_PATH="+t.TempDir()+"/rl.db")
	if resp := mustHTTP(t, sqliteEnv, lambdatest.Event(t, "ping.json")); resp.StatusCode != 200 {
		t.Errorf("lean build on SQLite: %d %s", resp.StatusCode, resp.Body)
	}
}
