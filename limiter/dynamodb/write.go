package dynamodb

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/smithy-go"
	"github.com/ft251/ratelimit/internal/fault"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ft251/ratelimit/internal/backoff"
)

// conditionFailed is what transact returns when conditions of the
// transaction failed: nothing was written. items are the indexes, in the
// transaction, of the writes whose condition failed, and old each one's
// item as the cancellation gave it (with ReturnValuesOnConditionCheckFailure
// ALL_OLD), nil when it gave none.
type conditionFailed struct {
	items []int
	old   []map[string]types.AttributeValue
}

func (e *conditionFailed) Error() string {
	return fmt.Sprintf("conditions failed on items %v", e.items)
}

// failedConditions lists the items of a cancelled transaction whose
// condition failed.
func failedConditions(err error) *conditionFailed {
	var tce *types.TransactionCanceledException
	errors.As(err, &tce)
	f := &conditionFailed{}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			f.items = append(f.items, i)
			f.old = append(f.old, r.Item)
		}
	}
	return f
}

// outcome is what an answer to a write says about it.
type outcome int

const (
	applied    outcome = iota
	notApplied         // cancelled by a failed condition: final
	tryAgain           // this call was not applied (a conflict, throttling)
	stillOpen          // the first call with this token may still run: repeat it
	lost               // no answer, or the server's fault: it may have been applied
	unknown            // refused as it is (a validation error): sending it again changes nothing
)

// outcomeOf reads DynamoDB's answer to a TransactWriteItems.
func outcomeOf(err error) outcome {
	var tce *types.TransactionCanceledException
	var inProgress *types.TransactionInProgressException
	switch {
	case err == nil:
		return applied
	case errors.As(err, &tce):
		again := false
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				return notApplied
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				again = true
			}
		}
		if again {
			return tryAgain
		}
		return unknown // a validation error: sending it again changes nothing
	case errors.As(err, &inProgress):
		return stillOpen
	case throttled(err):
		return tryAgain
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return unknown
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorFault() != smithy.FaultServer {
		return unknown
	}
	return lost // a connection reset, a timeout, a 500: the call may have been applied
}

// throttled reports errors that say a request was refused for throughput,
// and not applied.
func throttled(err error) bool {
	var throughput *types.ProvisionedThroughputExceededException
	var limit *types.RequestLimitExceeded
	return errors.As(err, &throughput) || errors.As(err, &limit) ||
		retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool()
}

// transact writes items in one transaction, applied once (see the package
// comment): nil when it was applied, a *conditionFailed when conditions
// failed, or a store error. The store makes every call itself, the SDK's
// retries off for this one, so that it sees every answer: a call that may
// have been applied (its answer lost, or it may still run) is repeated as
// it is, token and all, and only while no call with the token may have
// been applied does an answer of "not applied" (a conflict, throttling)
// lead to a new call. The SDK's own retries would hide the first answer
// behind the last: a lost answer, then a throttled repeat, looked like a
// write never applied, and the new call applied it twice.
func (s *Store) transact(ctx context.Context, op string, items []types.TransactWriteItem) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	in := newTransaction(items)
	mayBeApplied := false // by a call with in's token
	for try := 1; ; try++ {
		_, err := s.client.TransactWriteItems(ctx, in, oneAttempt)
		switch outcomeOf(err) {
		case applied:
			return nil
		case notApplied:
			return failedConditions(err)
		case tryAgain:
			if !mayBeApplied {
				in = newTransaction(items)
			}
		case stillOpen, lost:
			mayBeApplied = true
		default:
			return s.failed(fault.Unavailable, op, try, err)
		}
		if err := pause(ctx); err != nil {
			if mayBeApplied {
				return s.failed(fault.Unavailable, op, try, err)
			}
			return s.failed(fault.Busy, op, try, err)
		}
	}
}

// newTransaction is a new call writing items, with a token of its own.
func newTransaction(items []types.TransactWriteItem) *dynamodb.TransactWriteItemsInput {
	var b [16]byte
	crand.Read(b[:])
	return &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(hex.EncodeToString(b[:]))}
}

// oneAttempt turns the SDK's retries off for one call.
func oneAttempt(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

// retry runs a read until it succeeds, fails other than by throttling, or
// the budget or ctx runs out.
func (s *Store) retry(ctx context.Context, op string, read func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	for try := 1; ; try++ {
		err := read(ctx)
		switch {
		case err == nil:
			return nil
		case !throttled(err):
			return s.failed(fault.Unavailable, op, try, err)
		}
		if err := pause(ctx); err != nil {
			return s.failed(fault.Busy, op, try, err)
		}
	}
}

// pause sleeps a jittered 5 to 50 ms between tries, or fails when ctx ends.
func pause(ctx context.Context) error {
	return backoff.Sleep(ctx, time.Duration(5+rand.IntN(45))*time.Millisecond)
}

func (s *Store) failed(f fault.Class, op string, tries int, err error) error {
	return fault.Failed(f, "dynamodb: %s %s (%d tries): %w", op, s.cfg.Table, tries, err)
}
