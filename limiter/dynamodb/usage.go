package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/limiter"
)

// Usage reads key's counter (and, for a sliding policy, the previous
// window's) with one strongly consistent read.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := p.Validate(); err != nil {
		return limiter.Usage{}, fmt.Errorf("dynamodb: %w", err)
	}
	start := limiter.WindowStart(now, p.Window)
	keys := []map[string]types.AttributeValue{CounterKey(p, key, start)}
	if p.IsSliding() {
		keys = append(keys, CounterKey(p, key, start.Add(-p.Window)))
	}
	counts, err := s.counts(ctx, keys)
	if err != nil {
		return limiter.Usage{}, err
	}
	var prev int64
	if p.IsSliding() {
		prev = counts[1]
	}
	return p.UsageAt(key, now, counts[0], prev), nil
}

// counts reads the counters at keys, in order, with strongly consistent
// reads: one GetItem for one key, one BatchGetItem (and more for the keys
// DynamoDB leaves unprocessed) for several. A missing counter is 0.
func (s *Store) counts(ctx context.Context, keys []map[string]types.AttributeValue) ([]int64, error) {
	out := make([]int64, len(keys))
	if len(keys) == 1 {
		err := s.retry(ctx, "read count", func(ctx context.Context) error {
			res, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.cfg.Table, Key: keys[0], ConsistentRead: aws.Bool(true)})
			if err == nil {
				out[0], err = countOf(res.Item)
			}
			return err
		})
		return out, err
	}
	found := map[string]int64{}
	pending := keys
	for len(pending) > 0 {
		var res *dynamodb.BatchGetItemOutput
		err := s.retry(ctx, "read counts", func(ctx context.Context) (err error) {
			res, err = s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.cfg.Table: {Keys: pending, ConsistentRead: aws.Bool(true)},
			}})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, item := range res.Responses[s.cfg.Table] {
			n, err := countOf(item)
			if err != nil {
				return nil, s.failed(limiter.FaultCorrupt, "read counts", 1, err)
			}
			found[itemID(item)] = n
		}
		pending = res.UnprocessedKeys[s.cfg.Table].Keys
		if len(pending) > 0 {
			if err := pause(ctx); err != nil {
				return nil, s.failed(limiter.FaultBusy, "read counts", 1, err)
			}
		}
	}
	for i, k := range keys {
		out[i] = found[itemID(k)]
	}
	return out, nil
}

// itemID names an item by its primary key.
func itemID(item map[string]types.AttributeValue) string {
	pk, _ := item[attrPK].(*types.AttributeValueMemberS)
	sk, _ := item[attrSK].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return ""
	}
	return pk.Value + sep + sep + sk.Value
}
