package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter"
)

// SetOverride puts o as key's override under p, beside its counters, and
// returns the one it replaced. The next decision of every process reads it
// (see prepare). It reads the override, strongly consistent, and puts o on
// condition that the override is still as read, in a transaction: what it
// read is what the put replaced, also when the store repeated the call
// after a lost answer. (A PutItem with ReturnValues=ALL_OLD repeated after
// a lost answer returned the override its own first attempt had put.)
func (s *Store) SetOverride(ctx context.Context, p limiter.Policy, key string, o limiter.Override) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("dynamodb: %w", err)
	}
	if err := o.Validate(p); err != nil {
		return nil, fmt.Errorf("dynamodb: override of %q: %w", p.Name, err)
	}
	item := OverrideKey(p, key)
	item[attrLimit], item[attrBurst] = num(o.Limit), num(o.Burst)
	item["policy"], item["key"] = str(p.Name), str(key)
	item["updated_at"] = str(time.Now().UTC().Format(decide.CalledAtLayout))
	return s.replaceOverride(ctx, "set override", p, key, item)
}

// Override reads key's override under p with a strongly consistent read.
func (s *Store) Override(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("dynamodb: %w", err)
	}
	r := newReads()
	get := r.add(OverrideKey(p, key))
	if err := s.read(ctx, r); err != nil {
		return nil, err
	}
	return s.override(get())
}

// DeleteOverride deletes key's override under p and returns it: it reads
// it and deletes it on condition that it is still as read, as SetOverride
// puts one. When there is none, it writes nothing.
func (s *Store) DeleteOverride(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("dynamodb: %w", err)
	}
	return s.replaceOverride(ctx, "delete override", p, key, nil)
}

// Reset deletes key's counters of the window containing now and the one
// before it, or its GCRA bucket, in one transaction.
func (s *Store) Reset(ctx context.Context, p limiter.Policy, key string, now time.Time) error {
	if err := decide.TargetAt(p, key, now); err != nil {
		return fmt.Errorf("dynamodb: %w", err)
	}
	keys := []map[string]types.AttributeValue{BucketKey(p, key)}
	if !(p.Algorithm == limiter.GCRA) {
		start := decide.WindowStart(now, p.Window)
		keys = []map[string]types.AttributeValue{CounterKey(p, key, start), CounterKey(p, key, start.Add(-p.Window))}
	}
	items := make([]types.TransactWriteItem, len(keys))
	for i, k := range keys {
		items[i] = types.TransactWriteItem{Delete: &types.Delete{TableName: &s.cfg.Table, Key: k}}
	}
	return s.transact(ctx, "reset", items) // no conditions: none can fail
}

func (s *Store) override(item map[string]types.AttributeValue) (*limiter.Override, error) {
	o, err := overrideOf(item)
	if err != nil {
		return nil, s.failed(fault.Corrupt, "read override", 1, err)
	}
	return o, nil
}

// replaceOverride reads key's override under p, strongly consistent, and
// puts item in its place (deletes it when item is nil) on condition that
// it is still as read, in one transaction; a write whose condition failed
// (another admin call came in between) is read and tried again until the
// budget runs out. The transaction carries a token (see transact): a
// repeat after a lost answer is applied once, and is never checked against
// what its first attempt wrote, so the override read is exactly the one
// the write replaced. When the outcome stays unknown, the error says so
// (fault.Unavailable) and no override is returned. A delete of none
// writes nothing.
func (s *Store) replaceOverride(ctx context.Context, op string, p limiter.Policy, key string, item map[string]types.AttributeValue) (*limiter.Override, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	for try := 1; ; try++ {
		r := newReads()
		get := r.add(OverrideKey(p, key))
		if err := s.read(ctx, r); err != nil {
			return nil, err
		}
		old := get()
		before, err := s.override(old)
		if err != nil || (item == nil && old == nil) {
			return before, err
		}
		cond, names, values := asRead(old)
		w := types.TransactWriteItem{Put: &types.Put{TableName: &s.cfg.Table, Item: item,
			ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values}}
		if item == nil {
			w = types.TransactWriteItem{Delete: &types.Delete{TableName: &s.cfg.Table, Key: OverrideKey(p, key),
				ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values}}
		}
		err = s.transact(ctx, op, []types.TransactWriteItem{w})
		var failed *conditionFailed
		switch {
		case err == nil:
			return before, nil
		case !errors.As(err, &failed):
			return nil, err
		}
		if err := pause(ctx); err != nil {
			return nil, s.failed(fault.Busy, op, try, err)
		}
	}
}

// asRead is the condition that an override item is as old, the item read
// (nil: there was none): the same limit and burst, each present or absent
// as it was, which is all an override says.
func asRead(old map[string]types.AttributeValue) (cond *string, names map[string]string, values map[string]types.AttributeValue) {
	names = map[string]string{"#pk": attrPK}
	if old == nil {
		return aws.String("attribute_not_exists(#pk)"), names, nil
	}
	expr := "attribute_exists(#pk)"
	for _, attr := range []string{attrLimit, attrBurst} {
		names["#"+attr] = attr
		v, ok := old[attr]
		if !ok {
			expr += " AND attribute_not_exists(#" + attr + ")"
			continue
		}
		if values == nil {
			values = map[string]types.AttributeValue{}
		}
		expr += " AND #" + attr + " = :" + attr
		values[":"+attr] = v
	}
	return aws.String(expr), names, values
}
