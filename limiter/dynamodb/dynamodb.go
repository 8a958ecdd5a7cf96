// Package dynamodb keeps the limiter's counters and audit records in one
// DynamoDB table, for deployments that outgrow one SQLite file.
//
// Table: partition key pk and sort key sk, both strings, with time to live
// on the number attribute expires_at.
//
//   - A counter is pk = the policy's store key (the client key exactly for
//     /ping), sk = "window#" + the window start, with count, window_seconds
//     and expires_at = window end + one window, so that DynamoDB deletes it
//     once no decision can need it (the previous window stays).
//   - An audit record is pk = "call#" + client key + "#" + window start, sk =
//     called_at + "#" + request id + "#" + a random suffix, with key,
//     window_start, called_at, route, request_id and, when AUDIT_RETENTION
//     is set, expires_at = called_at + the retention. Records of one key and
//     window share a partition, so `Query pk = call#alice#...` lists them.
//
// # One decision
//
// An attempt is one TransactWriteItems: for each policy, add 1 to its
// counter, on condition, for a policy that is not a shadow, that the count
// is below what the policy allows (the limit; for a sliding policy, the
// limit less the previous window's weighted count, read first: that window
// no longer changes), and put the audit record. All happen or none, so every
// allowed attempt has exactly one audit record and there is none for an
// attempt that was not counted, whatever crashes in between. What a
// transaction cannot do is return values: so an allowed attempt then reads
// the counts back (strongly consistent GetItems), which may already include
// attempts that raced in after it. When a condition fails, a policy is at
// its limit: the attempt is counted with one UpdateItem ADD per policy that
// returns the new count, and denied. So a decision is the transaction and
// one request per policy, and one more per sliding policy. The denied path's updates are separate requests: a crash
// among them can leave a denied attempt counted under some policies and not
// others (never an allowed attempt, which the transaction covers).
//
// A transaction that conflicts with another on the same item, and a request
// DynamoDB throttles, are tried again until BusyTimeout or the request's
// deadline; then the store fails and the fail mode answers. One hot key is
// bounded by its partition's write throughput, about 1,000 write units a
// second, and a transactional write costs two: about 500 allowed decisions
// per second for a single key.
package dynamodb

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/limiter"
)

// Store is a limiter.Store on a DynamoDB table. It is safe for simultaneous
// use by multiple goroutines and processes.
type Store struct {
	client *dynamodb.Client
	cfg    limiter.StoreConfig
}

var _ limiter.Store = (*Store)(nil)

// Attribute names.
const (
	attrPK      = "pk"
	attrSK      = "sk"
	attrCount   = "count"
	attrWindow  = "window_seconds"
	attrExpires = "expires_at"
)

// Open returns a store on cfg.Table. It makes no request: Ready checks the
// table, and a missing table or an unreachable endpoint shows in every call
// as limiter.ErrUnavailable. opts adjust the AWS SDK's configuration (tests give static credentials).
func Open(ctx context.Context, cfg limiter.StoreConfig, opts ...func(*config.LoadOptions) error) (*Store, error) {
	if cfg.Table == "" {
		return nil, errors.New("dynamodb: no table name")
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = limiter.DefaultBusyTimeout
	}
	// The SDK's own retries stay short, well inside a request's budget;
	// the store's loop (do) decides when to give up.
	opts = append([]func(*config.LoadOptions) error{config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 2
			o.MaxBackoff = 50 * time.Millisecond
		})
	})}, opts...)
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: AWS configuration: %w", err)
	}
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	return &Store{client: client, cfg: cfg}, nil
}

// Close releases nothing: the SDK's client needs no closing.
func (s *Store) Close() error { return nil }

// Client is the DynamoDB client, for tests and tools that inspect the table.
func (s *Store) Client() *dynamodb.Client { return s.client }

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// CounterKey is the primary key of a counter item.
func CounterKey(p limiter.Policy, key string, windowStart time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: str(p.StoreKey(key)),
		attrSK: str("window#" + limiter.FormatWindow(windowStart)),
	}
}

// AuditPartition is the partition key of key's audit records in a window.
func AuditPartition(key string, windowStart time.Time) string {
	return "call#" + key + "#" + limiter.FormatWindow(windowStart)
}

// Ready checks that the table exists and the credentials may reach it,
// with one DescribeTable. Any failure wraps limiter.ErrUnavailable: a table
// created later, or credentials fixed later, let the store serve without a
// restart.
func (s *Store) Ready(ctx context.Context) error {
	return s.do(ctx, "describe table", func(ctx context.Context) error {
		_, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.cfg.Table})
		return err
	})
}

// decision is one attempt being decided: its counters' keys, the updates
// that count it, and the counts it is decided from.
type decision struct {
	a         limiter.Attempt
	keys      []map[string]types.AttributeValue
	updates   []*types.Update
	cur, prev []int64
	// hopeless is set when an enforced policy denies the attempt whatever
	// its window holds: no transaction can succeed.
	hopeless bool
}

// Allow counts the attempt under each check and decides it; see the
// package comment.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	if err := a.Validate(); err != nil {
		return limiter.Outcome{}, fmt.Errorf("dynamodb: %w", err)
	}
	if s.cfg.ReadOnly {
		return limiter.Outcome{}, fmt.Errorf("%w: dynamodb: store opened read-only", limiter.ErrUnavailable)
	}
	d, err := s.prepare(ctx, a)
	if err != nil {
		return limiter.Outcome{}, err
	}
	allowed := false
	if !d.hopeless {
		if allowed, err = s.transact(ctx, d); err != nil {
			return limiter.Outcome{}, err
		}
	}
	if !allowed {
		return s.deny(ctx, d)
	}
	// The transaction returned nothing: read the counts back. They may
	// include attempts after this one; the decision stands.
	for i := range a.Checks {
		if d.cur[i], err = s.read(ctx, d.keys[i]); err != nil {
			return limiter.Outcome{}, err
		}
	}
	o := a.Outcome(d.cur, d.prev)
	for i, c := range a.Checks {
		if !c.Policy.Shadow {
			o.Decisions[i].Allowed = true
		}
	}
	o.Allowed = true
	return o, nil
}

// prepare builds the updates that count d's attempt, each enforced one on
// condition that the count before it is below what the policy allows (for
// a sliding policy, read the previous window first: it no longer changes).
func (s *Store) prepare(ctx context.Context, a limiter.Attempt) (*decision, error) {
	n := len(a.Checks)
	d := &decision{a: a, keys: make([]map[string]types.AttributeValue, n), updates: make([]*types.Update, n),
		cur: make([]int64, n), prev: make([]int64, n)}
	for i, c := range a.Checks {
		start := limiter.WindowStart(a.Now, c.Policy.Window)
		d.keys[i] = CounterKey(c.Policy, c.Key, start)
		if c.Policy.IsSliding() {
			var err error
			if d.prev[i], err = s.read(ctx, CounterKey(c.Policy, c.Key, start.Add(-c.Policy.Window))); err != nil {
				return nil, err
			}
		}
		d.updates[i] = s.increment(d.keys[i], c.Policy, start)
		if !c.Policy.Shadow {
			below := c.Policy.MaxCount(a.Now, d.prev[i]) // the count before this attempt must be below it
			d.hopeless = d.hopeless || below < 1
			d.updates[i].ConditionExpression = aws.String("attribute_not_exists(#c) OR #c < :below")
			d.updates[i].ExpressionAttributeValues[":below"] = num(below)
		}
	}
	return d, nil
}

// transact counts and audits d's attempt in one transaction, and reports
// whether every condition held: the attempt is allowed.
func (s *Store) transact(ctx context.Context, d *decision) (bool, error) {
	items := make([]types.TransactWriteItem, 0, len(d.updates)+1)
	for _, u := range d.updates {
		items = append(items, types.TransactWriteItem{Update: u})
	}
	items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.cfg.Table, Item: s.auditItem(d.a)}})
	allowed := false
	err := s.do(ctx, "decide", func(ctx context.Context) error {
		_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		allowed = err == nil
		if overLimit(err) {
			return nil
		}
		return err
	})
	return allowed, err
}

// deny counts d's denied attempt under each policy, one UpdateItem each,
// which returns the new count. Denied whatever the counts say: an attempt
// without an audit record is never an allowed one.
func (s *Store) deny(ctx context.Context, d *decision) (limiter.Outcome, error) {
	for i, u := range d.updates {
		u.ConditionExpression = nil
		delete(u.ExpressionAttributeValues, ":below")
		err := s.do(ctx, "count", func(ctx context.Context) error {
			out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
				ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
				ReturnValues: types.ReturnValueUpdatedNew,
			})
			if err == nil {
				d.cur[i], err = countOf(out.Attributes)
			}
			return err
		})
		if err != nil {
			return limiter.Outcome{}, err
		}
	}
	o := d.a.Outcome(d.cur, d.prev)
	o.Allowed = false
	return o, nil
}

// increment is the update that adds one attempt to a counter and keeps its
// window length and expiry.
func (s *Store) increment(key map[string]types.AttributeValue, p limiter.Policy, start time.Time) *types.Update {
	return &types.Update{
		TableName:                &s.cfg.Table,
		Key:                      key,
		UpdateExpression:         aws.String("ADD #c :one SET #w = :w, #e = :e"),
		ExpressionAttributeNames: map[string]string{"#c": attrCount, "#w": attrWindow, "#e": attrExpires},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": num(1), ":w": num(p.WindowSeconds()), ":e": num(start.Add(2 * p.Window).Unix()),
		},
	}
}

// auditItem is the audit record of an allowed attempt, under its first
// check's key and window.
func (s *Store) auditItem(a limiter.Attempt) map[string]types.AttributeValue {
	first := a.Checks[0]
	start := limiter.WindowStart(a.Now, first.Policy.Window)
	nonce := make([]byte, 6)
	crand.Read(nonce)
	item := map[string]types.AttributeValue{
		attrPK:         str(AuditPartition(first.Key, start)),
		attrSK:         str(a.Now.UTC().Format(limiter.CalledAtLayout) + "#" + a.RequestID + "#" + hex.EncodeToString(nonce)),
		"key":          str(first.Key),
		"window_start": str(limiter.FormatWindow(start)),
		"called_at":    str(a.Now.UTC().Format(limiter.CalledAtLayout)),
		"route":        str(a.Route),
		"request_id":   str(a.RequestID),
	}
	if s.cfg.AuditRetention > 0 {
		item[attrExpires] = num(a.Now.Add(s.cfg.AuditRetention).Unix())
	}
	return item
}

// Usage reads key's counter with a strongly consistent GetItem.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := p.Validate(); err != nil {
		return limiter.Usage{}, fmt.Errorf("dynamodb: %w", err)
	}
	start := limiter.WindowStart(now, p.Window)
	cur, err := s.read(ctx, CounterKey(p, key, start))
	if err != nil {
		return limiter.Usage{}, err
	}
	var prev int64
	if p.IsSliding() {
		if prev, err = s.read(ctx, CounterKey(p, key, start.Add(-p.Window))); err != nil {
			return limiter.Usage{}, err
		}
	}
	return p.UsageAt(key, now, cur, prev), nil
}

func (s *Store) read(ctx context.Context, key map[string]types.AttributeValue) (int64, error) {
	var count int64
	err := s.do(ctx, "read count", func(ctx context.Context) error {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      &s.cfg.Table,
			Key:            key,
			ConsistentRead: aws.Bool(true),
		})
		if err == nil {
			count, err = countOf(out.Item)
		}
		return err
	})
	return count, err
}

// Prune deletes nothing: DynamoDB's time to live expires counters one
// window after their window ends, and audit records AUDIT_RETENTION after
// they were made. (Expired items may linger for a while until DynamoDB
// gets to them; no read ever needs them.)
func (s *Store) Prune(context.Context, time.Time, time.Time) (limiter.Pruned, error) {
	return limiter.Pruned{}, nil
}

func countOf(item map[string]types.AttributeValue) (int64, error) {
	v, ok := item[attrCount].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil // no counter yet
	}
	return strconv.ParseInt(v.Value, 10, 64)
}

// overLimit reports whether a transaction was cancelled because a
// counter's condition failed: an enforced policy is at its limit.
func overLimit(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

// retryable reports errors worth another try within the budget: a
// transaction that conflicted with another on the same item, and throttling
// that outlasted the SDK's own short retries.
func retryable(err error) bool {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
				return true
			}
		}
		return false
	}
	var conflict *types.TransactionConflictException
	var throughput *types.ProvisionedThroughputExceededException
	var limit *types.RequestLimitExceeded
	var inProgress *types.TransactionInProgressException
	return errors.As(err, &conflict) || errors.As(err, &throughput) || errors.As(err, &limit) || errors.As(err, &inProgress) ||
		retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool()
}

// do runs fn until it succeeds, fails for good, or the budget
// (BusyTimeout) or ctx runs out, sleeping a jittered 5 to 50 ms between
// tries. Failures come back wrapped as limiter.ErrUnavailable.
func (s *Store) do(ctx context.Context, op string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	for try := 0; ; try++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return fmt.Errorf("%w: dynamodb: %s %s: %w", limiter.ErrUnavailable, op, s.cfg.Table, err)
		}
		if limiter.Sleep(ctx, time.Duration(5+rand.IntN(45))*time.Millisecond) != nil {
			return fmt.Errorf("%w: dynamodb: %s %s: gave up after %d tries: %w", limiter.ErrUnavailable, op, s.cfg.Table, try+1, err)
		}
	}
}
