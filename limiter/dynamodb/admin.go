package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter"
)

// SetOverride puts o as key's override under p, beside its counters, and
// returns the one it replaced. The next decision of every process reads it
// (see prepare). A PutItem carries no token, and needs none: putting the
// same override twice leaves what putting it once does.
func (s *Store) SetOverride(ctx context.Context, p limiter.Policy, key string, o limiter.Override) (*limiter.Override, error) {
	if err := o.Validate(p); err != nil {
		return nil, fmt.Errorf("dynamodb: override of %q: %w", p.Name, err)
	}
	item := OverrideKey(p, key)
	item[attrLimit], item[attrBurst] = num(o.Limit), num(o.Burst)
	item["policy"], item["key"] = str(p.Name), str(key)
	item["updated_at"] = str(time.Now().UTC().Format(decide.CalledAtLayout))
	var old map[string]types.AttributeValue
	err := s.retry(ctx, "set override", func(ctx context.Context) error {
		res, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.cfg.Table, Item: item, ReturnValues: types.ReturnValueAllOld})
		if err == nil {
			old = res.Attributes
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.override(old)
}

// Override reads key's override under p with a strongly consistent read.
func (s *Store) Override(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	r := newReads()
	get := r.add(OverrideKey(p, key))
	if err := s.read(ctx, r); err != nil {
		return nil, err
	}
	return s.override(get())
}

// DeleteOverride deletes key's override under p and returns it.
func (s *Store) DeleteOverride(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	var old map[string]types.AttributeValue
	err := s.retry(ctx, "delete override", func(ctx context.Context) error {
		res, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.cfg.Table, Key: OverrideKey(p, key), ReturnValues: types.ReturnValueAllOld})
		if err == nil {
			old = res.Attributes
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.override(old)
}

// Reset deletes key's counters of the window containing now and the one
// before it, or its GCRA bucket, in one transaction.
func (s *Store) Reset(ctx context.Context, p limiter.Policy, key string, now time.Time) error {
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
