package dynamodb

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/limiter"
)

// decision is one attempt being decided: its counters' keys, the updates
// that count it, and the counts it is decided from.
type decision struct {
	a         limiter.Attempt
	keys      []map[string]types.AttributeValue
	cur, prev []int64
	// below holds, for each enforced policy, the count its counter must be
	// below for the attempt to be allowed.
	below []int64
}

// Allow counts the attempt under each check and decides it; see the
// package comment.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	if err := a.Validate(); err != nil {
		return limiter.Outcome{}, fmt.Errorf("dynamodb: %w", err)
	}
	if s.cfg.ReadOnly {
		return limiter.Outcome{}, limiter.Failed(limiter.FaultUnavailable, "dynamodb: store opened read-only")
	}
	d, err := s.prepare(ctx, a)
	if err != nil {
		return limiter.Outcome{}, err
	}
	allowed := false
	if !d.hopeless() {
		switch err := s.transact(ctx, "decide", d.items(s, true)); {
		case err == nil:
			allowed = true
		case !errors.Is(err, errConditionFailed):
			return limiter.Outcome{}, err
		}
	}
	if !allowed {
		// Count the denied attempt under every policy, all or none.
		if err := s.transact(ctx, "count denied", d.items(s, false)); err != nil {
			return limiter.Outcome{}, err
		}
	}
	// The transactions returned nothing: read the counts back. They may
	// include attempts after this one; the decision stands.
	if d.cur, err = s.counts(ctx, d.keys); err != nil {
		return limiter.Outcome{}, err
	}
	o := a.Outcome(d.cur, d.prev)
	o.Allowed = allowed
	for i, c := range a.Checks {
		if allowed && !c.Policy.Shadow {
			o.Decisions[i].Allowed = true
		}
	}
	return o, nil
}

// prepare finds d's counters and, for each enforced policy, the count its
// counter must be below for the attempt to be allowed: the limit, or for a
// sliding policy the limit less the previous window's weighted count, read
// first (that window no longer changes).
func (s *Store) prepare(ctx context.Context, a limiter.Attempt) (*decision, error) {
	n := len(a.Checks)
	d := &decision{a: a, keys: make([]map[string]types.AttributeValue, n), prev: make([]int64, n), below: make([]int64, n)}
	var prevKeys []map[string]types.AttributeValue
	var sliding []int
	for i, c := range a.Checks {
		start := limiter.WindowStart(a.Now, c.Policy.Window)
		d.keys[i] = CounterKey(c.Policy, c.Key, start)
		if c.Policy.IsSliding() {
			prevKeys = append(prevKeys, CounterKey(c.Policy, c.Key, start.Add(-c.Policy.Window)))
			sliding = append(sliding, i)
		}
	}
	if len(prevKeys) > 0 {
		prev, err := s.counts(ctx, prevKeys)
		if err != nil {
			return nil, err
		}
		for j, i := range sliding {
			d.prev[i] = prev[j]
		}
	}
	for i, c := range a.Checks {
		d.below[i] = c.Policy.MaxCount(a.Now, d.prev[i])
	}
	return d, nil
}

// hopeless reports whether an enforced policy denies the attempt whatever
// its window holds, so that no conditional transaction can succeed.
func (d *decision) hopeless() bool {
	for i, c := range d.a.Checks {
		if !c.Policy.Shadow && d.below[i] < 1 {
			return true
		}
	}
	return false
}

// items are the writes of d's transaction: an update per counter that
// adds the attempt, each enforced one on condition that its count is
// below what allows it when conditional, and the audit record when it is.
func (d *decision) items(s *Store, conditional bool) []types.TransactWriteItem {
	items := make([]types.TransactWriteItem, 0, len(d.keys)+1)
	for i, c := range d.a.Checks {
		u := s.increment(d.keys[i], c.Policy, limiter.WindowStart(d.a.Now, c.Policy.Window))
		if conditional && !c.Policy.Shadow {
			u.ConditionExpression = aws.String("attribute_not_exists(#c) OR #c < :below")
			u.ExpressionAttributeValues[":below"] = num(d.below[i])
		}
		items = append(items, types.TransactWriteItem{Update: u})
	}
	if conditional {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.cfg.Table, Item: s.auditItem(d.a)}})
	}
	return items
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
// check's key and window. Its random suffix keeps records of one instant
// and request id apart; it is drawn once per decision, so a repeated call
// sends the same record.
func (s *Store) auditItem(a limiter.Attempt) map[string]types.AttributeValue {
	first := a.Checks[0]
	start := limiter.WindowStart(a.Now, first.Policy.Window)
	nonce := make([]byte, 6)
	crand.Read(nonce)
	calledAt := a.Now.UTC().Format(limiter.CalledAtLayout)
	item := map[string]types.AttributeValue{
		attrPK:         str(AuditPartition(first.Key, start)),
		attrSK:         str(calledAt + "#" + a.RequestID + "#" + hex.EncodeToString(nonce)),
		"key":          str(first.Key),
		"window_start": str(limiter.FormatWindow(start)),
		"called_at":    str(calledAt),
		"route":        str(a.Route),
		"request_id":   str(a.RequestID),
	}
	if s.cfg.AuditRetention > 0 {
		item[attrExpires] = num(a.Now.Add(s.cfg.AuditRetention).Unix())
	}
	return item
}
