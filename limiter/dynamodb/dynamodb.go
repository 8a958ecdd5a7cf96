// Package dynamodb keeps the limiter's counters and audit records in one
// DynamoDB table, for deployments that outgrow one SQLite file.
//
// Table: partition key pk and sort key sk, both strings, with time to live
// on the number attribute expires_at. Every pk starts with the kind of item
// and a unit separator (U+001F), which no client key may contain (see
// limiter.ValidKey), so no client key can name another kind of item, nor
// another key's:
//
//   - A counter is pk = "counter" U+001F the policy's store key, sk =
//     "window#" + the window start, with count, window_seconds and
//     expires_at = window end + one window, so that DynamoDB deletes it
//     once no decision can need it (the previous window stays).
//   - An audit record is pk = "call" U+001F client key U+001F window start,
//     sk = called_at + "#" + request id + "#" + a random suffix, with key,
//     window_start, called_at, route, request_id and, when AUDIT_RETENTION
//     is set, expires_at = called_at + the retention. Records of one key and
//     window share a partition, so one Query lists them.
//
// # One decision
//
// A decision is two requests. One strongly consistent read (BatchGetItem)
// fetches everything it depends on: each key's override (pk as the
// counter's, sk = "override"), the counter of the current window, for a
// sliding policy the previous window's too, and a GCRA bucket (sk =
// "gcra": its TAT and the emission interval it was written with). The
// attempt is decided from what was read, and one TransactWriteItems
// writes the decision:
//
//   - Allowed: each window's counter gets the attempt's cost, on
//     condition, for a policy that is not a shadow, that it has room for
//     it (the limit; for a sliding policy, the limit less the previous
//     window's weighted count); each GCRA bucket the attempt passes moves,
//     on condition that it is where it was read; and the audit record is
//     put. All happen or none, so every allowed attempt has exactly one
//     audit record and there is none for an attempt that was not counted,
//     whatever crashes in between.
//   - Denied: each window's counter gets the attempt's cost (the windows
//     count every attempt), all or none, on no condition: counts only grow
//     within a window, so the attempt stays denied whatever raced in since
//     the read. Buckets do not move. If this write fails, the attempt is
//     denied all the same, uncounted: answering an error would let it
//     through under FAIL_MODE open.
//
// Nothing is read back: the counts a decision reports are the ones it
// read plus its cost, exact unless other decisions counted between its
// read and its write, and then the least they can be. A condition that
// the count is still the one read would make them exact under races too,
// but every decision in between cancels it: with two clients on one key
// every other transaction was cancelled (see BENCHMARKS.md).
//
// When other decisions filled a counter or moved a bucket between the
// read and the transaction, a condition fails and DynamoDB cancels the
// transaction, writing nothing. Every condition asks for
// ReturnValuesOnConditionCheckFailure ALL_OLD, so the cancellation carries
// each such item as it is now: the store decides again from those, with
// no other read (a full counter: the attempt is denied, and counted), and
// writes again, in a call of its own. An item that no longer exists (a
// bucket Reset deleted) comes back without one, and only then does the
// store read again. A bucket is set on condition that its TAT is the one
// read, however often: decisions that keep moving one are spread out by a
// jittered pause. Overrides and previous windows are not read again: an
// override set in between applies from the next decision on, as if the
// decision had been a moment earlier.
//
// # Writes are applied once
//
// Every write is a TransactWriteItems, which carries a ClientRequestToken:
// DynamoDB applies a repeat of a call with the same token once (within ten
// minutes). The store makes every call of a write itself, with the SDK's
// retries off, and sees every answer: a call whose answer was lost (a
// connection reset, a timeout, a 500, after which DynamoDB may have
// applied it), or that may still be running
// (TransactionInProgressException), is repeated as it is, token and all.
// An answer that says the call was not applied (a transaction cancelled by
// a conflict or throttling, throughput exceeded) leads to a new call with
// a new token only while no call with the current token may have been
// applied; after one that may have, the same call is repeated, which
// DynamoDB either applies or answers from the first. A cancellation by a
// failed condition ends the call, even after a lost answer: DynamoDB
// answers the repeat of a call it applied with success, so none with that
// token was applied, and the decision's next transaction is a call of its
// own. A validation error is final. When the budget runs out, the fail
// mode answers.
//
// An admin call that sets or deletes an override reads it first, strongly
// consistent, and writes on condition that it is still as read: the
// override it returns as replaced is exactly the one its write replaced,
// also when its answer was lost and the call repeated. (ReturnValues=ALL_OLD
// on a repeat gave back what the first attempt had written.)
//
// Conflicts and throttling are tried again until BusyTimeout or the
// request's deadline. One hot key is bounded by its partition's write
// throughput, about 1,000 write units a second, and a transactional write
// costs two: about 500 decisions per second for a single key.
package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ft251/ratelimit/limiter"
)

// Store is a limiter.Store on a DynamoDB table. It is safe for simultaneous
// use by multiple goroutines and processes.
type Store struct {
	client *dynamodb.Client
	cfg    Config
}

// Config says which table a Store keeps its items in, and how it waits.
type Config struct {
	// Table is the table's name; Endpoint, when set, the URL of a local
	// implementation (moto, DynamoDB Local). Region and credentials come
	// from the AWS SDK's usual chain.
	Table    string
	Endpoint string
	// BusyTimeout bounds each wait for DynamoDB to accept a write that
	// conflicted or was throttled; zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// AuditRetention is how long audit records are kept, as their time to
	// live; zero keeps them forever.
	AuditRetention time.Duration
	// ReadOnly refuses every write, as the status function's role would.
	ReadOnly bool
}

// DefaultBusyTimeout is a Config's BusyTimeout when it sets none.
const DefaultBusyTimeout = 3 * time.Second

// A ConfigError is one thing wrong with a Config: the field, and what.
type ConfigError struct {
	Field   string // "Table", "Endpoint", "BusyTimeout" or "AuditRetention"
	Problem string
}

func (e *ConfigError) Error() string { return "dynamodb: " + e.Field + ": " + e.Problem }

// Validate reports every problem with c as one error joining a
// *ConfigError each: no table name, an endpoint that is not an http:// or
// https:// URL or whose port is out of range, a negative duration.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Table == "":
		bad("Table", "not set; the DynamoDB store needs the table's name")
	case !tableName.MatchString(c.Table) && !tableARN.MatchString(c.Table):
		// DynamoDB would refuse every request: the store would start, and
		// answer each with its fail mode (open: nothing limited).
		bad("Table", "%q is no DynamoDB table name (3 to 255 of A-Z, a-z, 0-9, _, - and .) nor a table's ARN", c.Table)
	}
	if u := c.Endpoint; u != "" {
		parsed, err := url.Parse(u)
		switch {
		case err != nil || parsed.Scheme != "http" && parsed.Scheme != "https" || parsed.Hostname() == "":
			bad("Endpoint", "%q is not an http:// or https:// URL with a host", u)
		case strings.HasSuffix(parsed.Host, ":") || parsed.Port() != "" && !isPort(parsed.Port()):
			// No server listens there: every request would fail.
			bad("Endpoint", "%q has a port no server can have: it is from 1 to 65535", u)
		}
	}
	if c.BusyTimeout < 0 {
		bad("BusyTimeout", "%v is below zero", c.BusyTimeout)
	}
	if c.AuditRetention < 0 {
		bad("AuditRetention", "%v is below zero", c.AuditRetention)
	}
	return errors.Join(errs...)
}

var _ limiter.Store = (*Store)(nil)

// isPort reports whether p, a URL's digits after the host's colon, is a
// port a server may listen on.
func isPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// tableName and tableARN are what DynamoDB takes as a TableName.
var (
	tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
	tableARN  = regexp.MustCompile(`^arn:[a-z-]+:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$`)
)

// Open returns a store on cfg.Table. It makes no request: Ready checks the
// table, and a missing table or an unreachable endpoint shows in every call
// as limiter.ErrUnavailable. opts adjust the AWS SDK's configuration (tests
// give static credentials).
func Open(ctx context.Context, cfg Config, opts ...func(*config.LoadOptions) error) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = DefaultBusyTimeout
	}
	// The SDK's own retries stay short, well inside a request's budget;
	// the store's loop (see write.go) decides when to give up.
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

// Ready checks that the table exists and the credentials may reach it,
// with one DescribeTable. Any failure is transient: a table created later,
// or credentials fixed later, let the store serve without a restart.
func (s *Store) Ready(ctx context.Context) error {
	return s.retry(ctx, "describe table", func(ctx context.Context) error {
		_, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.cfg.Table})
		return err
	})
}

// Close releases nothing: the SDK's client needs no closing.
func (s *Store) Close() error { return nil }

// Client is the DynamoDB client, for tests and tools that inspect the table.
func (s *Store) Client() *dynamodb.Client { return s.client }

// Prune deletes nothing: DynamoDB's time to live expires counters one
// window after their window ends, and audit records AUDIT_RETENTION after
// they were made. (Expired items may linger for a while until DynamoDB
// gets to them; no read ever needs them.)
func (s *Store) Prune(context.Context, time.Time, time.Time) (limiter.Pruned, error) {
	return limiter.Pruned{}, nil
}
