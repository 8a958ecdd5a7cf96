package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter"
)

// Usage reads key's standing under p at now, with its override, in one
// strongly consistent read.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := decide.TargetAt(p, key, now); err != nil {
		return limiter.Usage{}, fmt.Errorf("dynamodb: %w", err)
	}
	r := newReads()
	st, o := r.state(p, key, now, true), r.add(OverrideKey(p, key))
	if err := s.read(ctx, r); err != nil {
		return limiter.Usage{}, err
	}
	state, err := st()
	if err != nil {
		return limiter.Usage{}, s.failed(fault.Corrupt, "read counts", 1, err)
	}
	over, err := overrideOf(o())
	if err != nil {
		return limiter.Usage{}, s.failed(fault.Corrupt, "read override", 1, err)
	}
	return decide.Usage(decide.Effective(limiter.Charge{Policy: p}, over), key, now, state), nil
}

// reads gathers items to read in one round trip: each add returns a
// function that gives the item once read (nil if it does not exist).
type reads struct {
	keys  []map[string]types.AttributeValue
	index map[string]int
	items map[string]map[string]types.AttributeValue
}

func newReads() *reads {
	return &reads{index: map[string]int{}, items: map[string]map[string]types.AttributeValue{}}
}

func (r *reads) add(key map[string]types.AttributeValue) func() map[string]types.AttributeValue {
	id := itemID(key)
	if _, ok := r.index[id]; !ok {
		r.index[id] = len(r.keys)
		r.keys = append(r.keys, key)
	}
	return func() map[string]types.AttributeValue { return r.items[id] }
}

// state adds what key's state under p at now is read from: for a GCRA
// policy its bucket, for a sliding one the previous window's counter, and
// with current, the current window's too.
func (r *reads) state(p limiter.Policy, key string, now time.Time, current bool) func() (decide.State, error) {
	start := decide.WindowStart(now, p.Window)
	if p.Algorithm == limiter.GCRA {
		bucket := r.add(BucketKey(p, key))
		return func() (decide.State, error) { return bucketState(bucket()) }
	}
	none := func() map[string]types.AttributeValue { return nil }
	cur, prev := none, none
	if current {
		cur = r.add(CounterKey(p, key, start))
	}
	if p.Algorithm == limiter.Sliding {
		prev = r.add(CounterKey(p, key, start.Add(-p.Window)))
	}
	return func() (st decide.State, err error) {
		if st.Cur, err = numberOf(cur(), attrCount); err == nil {
			st.Prev, err = numberOf(prev(), attrCount)
		}
		return st, err
	}
}

// bucketState is what a GCRA bucket item holds: its TAT and the emission
// interval it was written with; the zero State when there is none.
func bucketState(item map[string]types.AttributeValue) (decide.State, error) {
	ns, err := numberOf(item, attrTAT)
	if err != nil || ns == 0 {
		return decide.State{}, err
	}
	emission, err := numberOf(item, attrEmission)
	return decide.State{TAT: time.Unix(0, ns), Emission: time.Duration(emission)}, err
}

// read reads r's items with strongly consistent reads: one GetItem for one
// key, one BatchGetItem (and more for the keys DynamoDB leaves unprocessed)
// for several.
func (s *Store) read(ctx context.Context, r *reads) error {
	if len(r.keys) == 1 {
		return s.retry(ctx, "read", func(ctx context.Context) error {
			res, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.cfg.Table, Key: r.keys[0], ConsistentRead: aws.Bool(true)})
			if err == nil && res.Item != nil {
				r.items[itemID(r.keys[0])] = res.Item
			}
			return err
		})
	}
	for pending := r.keys; len(pending) > 0; {
		var res *dynamodb.BatchGetItemOutput
		err := s.retry(ctx, "read", func(ctx context.Context) (err error) {
			res, err = s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.cfg.Table: {Keys: pending, ConsistentRead: aws.Bool(true)},
			}})
			return err
		})
		if err != nil {
			return err
		}
		for _, item := range res.Responses[s.cfg.Table] {
			r.items[itemID(item)] = item
		}
		if pending = res.UnprocessedKeys[s.cfg.Table].Keys; len(pending) > 0 {
			if err := pause(ctx); err != nil {
				return s.failed(fault.Busy, "read", 1, err)
			}
		}
	}
	return nil
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

// overrideOf reads an override item; nil when there is none.
func overrideOf(item map[string]types.AttributeValue) (*limiter.Override, error) {
	if item == nil {
		return nil, nil
	}
	limit, err := numberOf(item, attrLimit)
	if err != nil {
		return nil, err
	}
	burst, err := numberOf(item, attrBurst)
	if err != nil {
		return nil, err
	}
	return &limiter.Override{Limit: limit, Burst: burst}, nil
}
