// Command dynamolat measures the DynamoDB store's decisions on a latency
// model: moto_server behind a proxy that delays every request by a fixed
// time for its kind (a read, a single-item write, a transaction), and
// counts the requests of each kind and the capacity units DynamoDB on
// demand would bill for them.
//
//	go run ./internal/cmd/dynamolat -before /tmp/dynamolat-before
//
// For each case (allowed: a limit no run reaches; denied: a limit of 1,
// every key's counter at 1 before the run),
// number of concurrent clients and number of keys, it runs the store it
// was built with, the same command built from an earlier commit (-before:
// the store as it was then), and a one-UpdateItem limiter, the floor: an
// ADD with a condition and ReturnValues, with no audit record and no
// idempotency token. Each run starts its own moto_server, served one
// request at a time and without the copy of the whole table moto makes
// for every transaction (see serve; moto's own time per request adds to
// the model's, and is printed), drives decisions for -duration and
// checks the table after: for every key, the stored count is the attempts
// counted and the audit records are the allowed ones (for the floor, the
// count is the allowed ones). It prints one Markdown table: decisions/s,
// latency percentiles, requests and units per decision, and the price per
// million decisions at the given on-demand prices.
//
// The command must build at the earlier commit too, so it uses only what
// the store offered then, and starts moto itself. To build the one for
// -before:
//
//	git worktree add /tmp/dyn-before e014978
//	cp -r internal/cmd/dynamolat /tmp/dyn-before/internal/cmd/
//	go -C /tmp/dyn-before build -o /tmp/dynamolat-before ./internal/cmd/dynamolat
//
// -also name=path,... adds more builds made the same way, each a variant
// of its own name.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	sdk "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

type options struct {
	cases    []string
	clients  []int
	keys     []int
	duration time.Duration
	delay    latency
	before   string
	also     []variant // more builds to compare, by name
	floor    bool
	// prices are dollars per million read and write request units.
	priceRead, priceWrite float64
	// one, when set, is the run of one variant a child process makes:
	// "variant case clients keys".
	one string
}

// result is one run's figures.
type result struct {
	Variant   string        `json:"variant"`
	Case      string        `json:"case"`
	Clients   int           `json:"clients"`
	Keys      int           `json:"keys"`
	Decisions int           `json:"decisions"`
	Allowed   int           `json:"allowed"`
	Errors    int           `json:"errors"`
	Seconds   float64       `json:"seconds"`
	P50       time.Duration `json:"p50"`
	P99       time.Duration `json:"p99"`
	Counts    counts        `json:"counts"`
	Exact     bool          `json:"exact"`
	Problem   string        `json:"problem,omitempty"`
}

func main() {
	o := parseFlags()
	if o.one != "" {
		r, err := runOne(o)
		if err != nil {
			fatal(err)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	var rows []result
	for _, c := range o.cases {
		for _, clients := range o.clients {
			for _, keys := range o.keys {
				for _, v := range o.variants(self) {
					r, err := runChild(o, v.bin, v.name, c, clients, keys)
					if err != nil {
						fatal(fmt.Errorf("%s %s %d clients %d keys: %w", v.name, c, clients, keys, err))
					}
					fmt.Fprintf(os.Stderr, "%s %s clients=%d keys=%d: %.0f/s\n", v.name, c, clients, keys, float64(r.Decisions)/r.Seconds)
					rows = append(rows, r)
				}
			}
		}
	}
	printTable(o, rows)
	for _, r := range rows {
		if !r.Exact {
			os.Exit(1)
		}
	}
}

func parseFlags() options {
	var o options
	var cases, clients, keys, also string
	flag.StringVar(&cases, "cases", "allowed,denied", "allowed (a limit no run reaches), denied (a limit of 1, reached before the run)")
	flag.StringVar(&clients, "clients", "1,16", "concurrent clients, one run each")
	flag.StringVar(&keys, "keys", "1,1000", "keys the clients spread their decisions over, one run each")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long each run decides")
	flag.DurationVar(&o.delay.read, "read", 4*time.Millisecond, "latency of a read (GetItem, BatchGetItem)")
	flag.DurationVar(&o.delay.write, "write", 4*time.Millisecond, "latency of a single-item write (UpdateItem)")
	flag.DurationVar(&o.delay.transact, "transact", 8*time.Millisecond, "latency of a TransactWriteItems")
	flag.StringVar(&o.before, "before", "", "this command built at an earlier commit: its store runs each case too")
	flag.StringVar(&also, "also", "", "more builds of this command to run each case with, as name=path,name=path")
	flag.BoolVar(&o.floor, "floor", true, "run the one-UpdateItem floor too")
	flag.Float64Var(&o.priceRead, "price-read", 0.125, "dollars per million read request units")
	flag.Float64Var(&o.priceWrite, "price-write", 0.625, "dollars per million write request units")
	flag.StringVar(&o.one, "one", "", "internal: run one variant (\"variant case clients keys\") and print it as JSON")
	flag.Parse()
	o.cases = strings.Split(cases, ",")
	for _, a := range strings.Split(also, ",") {
		if a == "" {
			continue
		}
		name, bin, ok := strings.Cut(a, "=")
		if !ok || name == "" || bin == "" || strings.ContainsAny(name, " ") {
			fatal(fmt.Errorf("-also %q: want name=path", a))
		}
		o.also = append(o.also, variant{name, bin})
	}
	var err error
	if o.clients, err = ints(clients); err == nil {
		o.keys, err = ints(keys)
	}
	if err != nil {
		fatal(err)
	}
	return o
}

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

type variant struct{ name, bin string }

// variants are what each case runs, in order: the store before, any
// others, the store now, the floor.
func (o options) variants(self string) []variant {
	var vs []variant
	if o.before != "" {
		vs = append(vs, variant{"before", o.before})
	}
	vs = append(vs, o.also...)
	vs = append(vs, variant{"after", self})
	if o.floor {
		vs = append(vs, variant{"floor", self})
	}
	return vs
}

// runChild runs one variant in a process of its own (bin), with its own
// moto_server, and reads its result.
func runChild(o options, bin, name, c string, clients, keys int) (result, error) {
	cmd := exec.Command(bin, "-one", fmt.Sprintf("%s %s %d %d", name, c, clients, keys),
		"-duration", o.duration.String(), "-read", o.delay.read.String(), "-write", o.delay.write.String(), "-transact", o.delay.transact.String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return result{}, err
	}
	var r result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return result{}, fmt.Errorf("%v in %q", err, out.String())
	}
	r.Variant = name
	return r, nil
}

// t0 is the instant of every decision: the runs stay in one window.
var t0 = time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)

// runOne is one variant's run, in this process.
func runOne(o options) (result, error) {
	var r result
	if _, err := fmt.Sscanf(o.one, "%s %s %d %d", &r.Variant, &r.Case, &r.Clients, &r.Keys); err != nil {
		return r, fmt.Errorf("-one %q: %w", o.one, err)
	}
	p := limiter.Policy{Name: "ping", Limit: limiter.MaxLimit, Window: time.Hour}
	if r.Case == "denied" {
		p.Limit = 1
	}
	m, err := startMoto()
	if err != nil {
		return r, err
	}
	defer m.stop()
	ctx := context.Background()
	direct, err := client(ctx, m.endpoint)
	if err != nil {
		return r, err
	}
	table := "dynamolat"
	if err := createTable(ctx, direct, table); err != nil {
		return r, err
	}
	seeded := 0
	if r.Case == "denied" {
		// Every key at its limit before the run: each decision is denied.
		if err := seed(ctx, direct, table, p, r.Keys); err != nil {
			return r, err
		}
		seeded = 1
	}
	px := newProxy(m.endpoint, o.delay)
	srv := httptest.NewServer(px)
	defer srv.Close()
	decide, err := decider(ctx, r.Variant, table, srv.URL, p)
	if err != nil {
		return r, err
	}
	// Warm moto up (its first requests are slow) on a key of its own,
	// then count from zero.
	for i := range 20 {
		if _, err := decide(fmt.Sprint("warm-up-", i%2)); err != nil {
			return r, fmt.Errorf("warm-up: %w", err)
		}
	}
	before := px.snapshot()
	t := drive(r.Clients, r.Keys, o.duration, decide)
	after := px.snapshot()
	r.Decisions, r.Allowed, r.Errors, r.Seconds = t.decisions, t.allowed, t.errors, t.elapsed.Seconds()
	slices.Sort(t.latencies)
	r.P50, r.P99 = quantile(t.latencies, 0.50), quantile(t.latencies, 0.99)
	r.Counts = minus(after, before)
	r.Problem = check(ctx, direct, table, r.Variant, t, seeded)
	r.Exact = r.Problem == "" && r.Errors == 0
	return r, nil
}

// decider returns the decision of one attempt on key by the variant.
func decider(ctx context.Context, variant, table, endpoint string, p limiter.Policy) (func(key string) (bool, error), error) {
	if variant == "floor" {
		c, err := client(ctx, endpoint)
		if err != nil {
			return nil, err
		}
		return func(key string) (bool, error) { return floor(ctx, c, table, p, key) }, nil
	}
	s, err := dynamodb.Open(ctx, dynamodb.Config{Table: table, Endpoint: endpoint}, dynamotest.Options()...)
	if err != nil {
		return nil, err
	}
	var n int64
	var mu sync.Mutex
	return func(key string) (bool, error) {
		mu.Lock()
		n++
		rid := fmt.Sprint("r", n)
		mu.Unlock()
		o, err := s.Allow(ctx, limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: key}}, Now: t0, Route: "GET /ping", RequestID: rid})
		return o.Allowed, err
	}, nil
}

// floor decides with one UpdateItem: add 1 on condition that the count is
// below the limit, returning the new count, or, when the condition
// fails, the count as it is. The least a DynamoDB counter can cost: no
// audit record, no token (a lost answer's retry counts twice), denied
// attempts uncounted.
func floor(ctx context.Context, c *sdk.Client, table string, p limiter.Policy, key string) (bool, error) {
	_, err := c.UpdateItem(ctx, &sdk.UpdateItemInput{
		TableName:                           &table,
		Key:                                 dynamodb.CounterKey(p, key, t0.Truncate(p.Window)),
		UpdateExpression:                    aws.String("ADD #c :one"),
		ConditionExpression:                 aws.String("attribute_not_exists(#c) OR #c < :limit"),
		ExpressionAttributeNames:            map[string]string{"#c": "count"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}, ":limit": &types.AttributeValueMemberN{Value: fmt.Sprint(p.Limit)}},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return false, nil
	}
	return err == nil, err
}

// tally is what the clients of one run did.
type tally struct {
	decisions, allowed, errors int
	elapsed                    time.Duration
	latencies                  []time.Duration
	attempts, allowedBy        map[string]int // by key
}

// drive runs clients that each decide one attempt after another, on a
// key drawn from keys, for d.
func drive(clients, keys int, d time.Duration, decide func(string) (bool, error)) tally {
	t := tally{attempts: map[string]int{}, allowedBy: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		wg.Go(func() {
			for time.Now().Before(deadline) {
				key := "k" + strconv.Itoa(rng.IntN(keys))
				began := time.Now()
				ok, err := decide(key)
				took := time.Since(began)
				mu.Lock()
				t.decisions++
				t.latencies = append(t.latencies, took)
				switch {
				case err != nil:
					t.errors++
				case ok:
					t.allowed++
					t.allowedBy[key]++
				}
				if err == nil {
					t.attempts[key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.elapsed = time.Since(start)
	return t
}

// seed puts keys' counters at 1, a limit of 1, with no audit record.
func seed(ctx context.Context, c *sdk.Client, table string, p limiter.Policy, keys int) error {
	start := t0.Truncate(p.Window)
	for first := 0; first < keys; first += 25 {
		var puts []types.WriteRequest
		for k := first; k < min(first+25, keys); k++ {
			item := dynamodb.CounterKey(p, "k"+strconv.Itoa(k), start)
			item["count"] = &types.AttributeValueMemberN{Value: "1"}
			item["window_seconds"] = &types.AttributeValueMemberN{Value: fmt.Sprint(int64(p.Window / time.Second))}
			puts = append(puts, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		if _, err := c.BatchWriteItem(ctx, &sdk.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: puts}}); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// check compares the table with what the clients saw: for every key, the
// store's count is its attempts and its audit records the allowed ones;
// the floor's count is the allowed ones; seeded more, in each.
func check(ctx context.Context, c *sdk.Client, table, variant string, t tally, seeded int) string {
	count, audit := map[string]int{}, map[string]int{}
	pages := sdk.NewScanPaginator(c, &sdk.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err.Error()
		}
		for _, it := range page.Items {
			pk := it["pk"].(*types.AttributeValueMemberS).Value
			parts := strings.Split(pk, "\x1f")
			switch {
			case len(parts) < 2 || strings.HasPrefix(parts[1], "warm-up-"):
			case parts[0] == "counter":
				n, _ := strconv.Atoi(it["count"].(*types.AttributeValueMemberN).Value)
				count[parts[1]] += n
			case parts[0] == "call":
				audit[parts[1]]++
			}
		}
	}
	var problems []string
	for key, n := range t.attempts {
		want := n + seeded
		if variant == "floor" {
			want = t.allowedBy[key] + seeded
		}
		if count[key] != want || (variant != "floor" && audit[key] != t.allowedBy[key]) {
			problems = append(problems, fmt.Sprintf("%s: count %d, audit %d; want %d, %d", key, count[key], audit[key], want, t.allowedBy[key]))
		}
	}
	slices.Sort(problems)
	if len(problems) > 3 {
		problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
	}
	return strings.Join(problems, "; ")
}

func minus(a, b counts) counts {
	d := counts{Requests: map[string]int64{}, RRU: a.RRU - b.RRU, WRU: a.WRU - b.WRU, Cancelled: a.Cancelled - b.Cancelled, Moto: a.Moto - b.Moto}
	for k, v := range a.Requests {
		if n := v - b.Requests[k]; n != 0 {
			d.Requests[k] = n
		}
	}
	return d
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

func client(ctx context.Context, endpoint string) (*sdk.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, dynamotest.Options()...)
	if err != nil {
		return nil, err
	}
	return sdk.NewFromConfig(cfg, func(o *sdk.Options) { o.BaseEndpoint = aws.String(endpoint) }), nil
}

// createTable creates a table shaped as template.yaml's.
func createTable(ctx context.Context, c *sdk.Client, name string) error {
	_, err := c.CreateTable(ctx, &sdk.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	})
	return err
}

// printTable prints the runs as one Markdown table.
func printTable(o options, rows []result) {
	fmt.Printf("Latency model: reads %v, single-item writes %v, transactions %v; %v per run; prices $%.3f per million read units, $%.3f per million write units.\n\n",
		o.delay.read, o.delay.write, o.delay.transact, o.duration, o.priceRead, o.priceWrite)
	fmt.Println("| case | clients | keys | variant | decisions/s | p50 | p99 | moto's time | requests/decision | read units | write units | $ per million | allowed | exact |")
	fmt.Println("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rows {
		n := float64(r.Decisions)
		var ops []string
		var total int64
		for _, op := range []string{"GetItem", "BatchGetItem", "TransactWriteItems", "UpdateItem"} {
			if v := r.Counts.Requests[op]; v > 0 {
				ops = append(ops, fmt.Sprintf("%s %.2f", abbrev[op], float64(v)/n))
				total += v
			}
		}
		exact := "yes"
		if !r.Exact {
			exact = fmt.Sprintf("**no**: %d errors %s", r.Errors, r.Problem)
		}
		rru, wru := r.Counts.RRU/n, r.Counts.WRU/n
		fmt.Printf("| %s | %d | %d | %s | %.0f | %.1f ms | %.1f ms | %.1f ms | **%.2f** (%s) | %.2f | %.2f | $%.2f | %.0f%% | %s |\n",
			r.Case, r.Clients, r.Keys, r.Variant, n/r.Seconds, ms(r.P50), ms(r.P99), ms(r.Counts.Moto)/n, float64(total)/n, strings.Join(ops, ", "),
			rru, wru, rru*o.priceRead+wru*o.priceWrite, 100*float64(r.Allowed)/n, exact)
	}
}

var abbrev = map[string]string{"GetItem": "Get", "BatchGetItem": "BatchGet", "TransactWriteItems": "Transact", "UpdateItem": "Update"}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "dynamolat:", err)
	os.Exit(1)
}
