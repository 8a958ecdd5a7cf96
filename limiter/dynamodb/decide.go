package dynamodb

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter"
)

// decision is one attempt being decided: its charges with their overrides
// applied, what was read of them first, and the counts read back.
type decision struct {
	a      limiter.Attempt // with the effective policies
	states []decide.State
	keys   []map[string]types.AttributeValue // each window check's counter; nil for GCRA
	// denied marks the charges known to have denied the attempt: by what
	// was read, or by a failed condition. The others may have allowed it.
	denied []bool
}

// Allow counts the attempt under each check and decides it; see the
// package comment.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	o, err := s.allow(ctx, a)
	if err != nil {
		return limiter.Outcome{}, err
	}
	decide.Report(ctx, o)
	return o.Public(), nil
}

func (s *Store) allow(ctx context.Context, a limiter.Attempt) (decide.Outcome, error) {
	if err := decide.Validate(a); err != nil {
		return decide.Outcome{}, fmt.Errorf("dynamodb: %w", err)
	}
	if s.cfg.ReadOnly {
		return decide.Outcome{}, fault.Failed(fault.Unavailable, "dynamodb: store opened read-only")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	for try := 1; ; try++ {
		d, err := s.prepare(ctx, a)
		if err != nil {
			return decide.Outcome{}, err
		}
		allowed, err := s.tryAllow(ctx, d)
		if errors.Is(err, errBucketMoved) {
			// Another decision moved a GCRA bucket since it was read:
			// decide again from a fresh read.
			if err := pause(ctx); err != nil {
				return decide.Outcome{}, s.failed(fault.Busy, "decide", try, errBucketMoved)
			}
			continue
		}
		if err != nil {
			return decide.Outcome{}, err
		}
		if !allowed {
			// Count the denied attempt under every window policy, all or
			// none; GCRA buckets do not move for a denied attempt. If
			// that fails, the attempt is denied all the same, uncounted:
			// answering an error would let it through under FAIL_MODE
			// open, the one answer it must not get.
			if items := d.counts(s, false); len(items) > 0 {
				if err := s.transact(ctx, "count denied", items); err != nil {
					return d.estimate(false), nil
				}
			}
		}
		return s.outcome(ctx, d, allowed)
	}
}

// errBucketMoved says a GCRA bucket changed between its read and the
// conditional write: decide again from a fresh read.
var errBucketMoved = errors.New("a GCRA bucket moved")

// tryAllow writes the attempt as allowed, on condition that every enforced
// window policy still has room and every GCRA bucket is as it was read, and
// reports whether it could. An attempt that an enforced policy denies
// whatever the writes would find (a cost beyond a window's room, a GCRA
// bucket too full) writes nothing here.
func (s *Store) tryAllow(ctx context.Context, d *decision) (bool, error) {
	denied := false
	for i, c := range d.a.Charges {
		if !c.Policy.Shadow && !d.fits(i) {
			d.denied[i], denied = true, true
		}
	}
	if denied {
		return false, nil
	}
	counts := d.counts(s, true)
	items := append(counts, d.buckets(s)...)
	items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.cfg.Table, Item: s.auditItem(d.a)}})
	err := s.transact(ctx, "decide", items)
	var failed *conditionFailed
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &failed):
		return false, err
	}
	full := false
	for _, item := range failed.items {
		if item < len(counts) {
			// A window at its limit (only enforced counters have
			// conditions): the item'th window check.
			d.denied[d.windowCheck(item)], full = true, true
		}
	}
	if full {
		return false, nil
	}
	return false, errBucketMoved
}

// windowCheck is the index of the check whose counter is the n'th of
// counts' items: they follow the window charges in order.
func (d *decision) windowCheck(n int) int {
	for i, k := range d.keys {
		if k == nil {
			continue
		}
		if n == 0 {
			return i
		}
		n--
	}
	return 0
}

// estimate is the outcome when the counts written cannot be read back
// (the writes were applied, or, for a denial, not): the decision stands,
// and each window's count is the least it can be, the attempt's own cost,
// or, under a policy known to have denied it, one more than its limit
// allows. It never tells a client to wait for a policy that did not deny
// it; it may tell one that more is left than is.
func (d *decision) estimate(allowed bool) decide.Outcome {
	for i, c := range d.a.Charges {
		if d.keys[i] == nil {
			continue
		}
		d.states[i].Cur = decide.Units(c)
		if d.denied[i] {
			d.states[i].Cur = d.countBound(i) + decide.Units(c)
		}
	}
	return decide.Decided(d.a, d.states, allowed)
}

// fits reports whether check i, as read, leaves the attempt room: a
// window's counter below what it must be below, a GCRA bucket with room
// for the cost.
func (d *decision) fits(i int) bool {
	if d.a.Charges[i].Policy.Algorithm == limiter.GCRA {
		return d.gcra(i).Allowed
	}
	return d.countBound(i) >= 1
}

// gcra is GCRA check i's decision alone, from the bucket as read: whether
// it lets the attempt through, and where it moves the bucket if so.
func (d *decision) gcra(i int) decide.Decision {
	return decide.Decide(limiter.Attempt{Charges: d.a.Charges[i : i+1], Now: d.a.Now}, d.states[i:i+1]).Decisions[0]
}

// prepare reads, in one round trip, what a's charges are decided from
// before any write: every key's override, the previous windows of sliding
// policies (they no longer change) and GCRA buckets.
func (s *Store) prepare(ctx context.Context, a limiter.Attempt) (*decision, error) {
	r := newReads()
	states := make([]func() (decide.State, error), len(a.Charges))
	overrides := make([]func() map[string]types.AttributeValue, len(a.Charges))
	for i, c := range a.Charges {
		states[i] = r.state(c.Policy, c.Key, a.Now, false)
		overrides[i] = r.add(OverrideKey(c.Policy, c.Key))
	}
	if err := s.read(ctx, r); err != nil {
		return nil, err
	}
	d := &decision{a: a, states: make([]decide.State, len(a.Charges)), keys: make([]map[string]types.AttributeValue, len(a.Charges)), denied: make([]bool, len(a.Charges))}
	d.a.Charges = make([]limiter.Charge, len(a.Charges))
	for i, c := range a.Charges {
		o, err := overrideOf(overrides[i]())
		if err == nil {
			d.states[i], err = states[i]()
		}
		if err != nil {
			return nil, s.failed(fault.Corrupt, "read", 1, err)
		}
		d.a.Charges[i] = c
		d.a.Charges[i].Policy = decide.Effective(c, o)
		if c.Policy.Algorithm != limiter.GCRA {
			d.keys[i] = CounterKey(c.Policy, c.Key, decide.WindowStart(a.Now, c.Policy.Window))
		}
	}
	if err := decide.Impossible(d.a); err != nil {
		return nil, fmt.Errorf("dynamodb: %w", err) // before any write
	}
	return d, nil
}

// countBound is the count charge i's counter must be below for the attempt to
// fit: the most it may hold with the attempt's cost added, less that cost,
// plus one. For window charges only.
func (d *decision) countBound(i int) int64 {
	c := d.a.Charges[i]
	return decide.MaxCount(c.Policy, d.a.Now, d.states[i].Prev) - decide.Units(c) + 1
}

// counts are the updates that add the attempt's cost to each window
// counter, each enforced one, when conditional, on condition that the
// counter has room for it.
func (d *decision) counts(s *Store, conditional bool) []types.TransactWriteItem {
	var items []types.TransactWriteItem
	for i, c := range d.a.Charges {
		if d.keys[i] == nil {
			continue
		}
		start := decide.WindowStart(d.a.Now, c.Policy.Window)
		u := &types.Update{
			TableName:                &s.cfg.Table,
			Key:                      d.keys[i],
			UpdateExpression:         aws.String("ADD #c :cost SET #w = :w, #e = :e"),
			ExpressionAttributeNames: map[string]string{"#c": attrCount, "#w": attrWindow, "#e": attrExpires},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":cost": num(decide.Units(c)), ":w": num(decide.WindowSeconds(c.Policy)), ":e": num(start.Add(2 * c.Policy.Window).Unix()),
			},
		}
		if conditional && !c.Policy.Shadow {
			u.ConditionExpression = aws.String("attribute_not_exists(#c) OR #c < :below")
			u.ExpressionAttributeValues[":below"] = num(d.countBound(i))
		}
		items = append(items, types.TransactWriteItem{Update: u})
	}
	return items
}

// buckets are the writes that move each GCRA bucket the attempt passes,
// on condition that it is where it was read, so that two decisions never
// both move it from the same place (the over-admission of a read, then a
// blind write).
func (d *decision) buckets(s *Store) []types.TransactWriteItem {
	var items []types.TransactWriteItem
	for i, c := range d.a.Charges {
		if c.Policy.Algorithm != limiter.GCRA {
			continue
		}
		g := d.gcra(i)
		if !g.Moved {
			continue // a shadow that would deny: its bucket stays
		}
		next := g.TAT
		u := &types.Update{
			TableName:                &s.cfg.Table,
			Key:                      BucketKey(c.Policy, c.Key),
			UpdateExpression:         aws.String("SET #t = :next, #m = :emission, #e = :e"),
			ExpressionAttributeNames: map[string]string{"#t": attrTAT, "#m": attrEmission, "#e": attrExpires},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":next": num(next.UnixNano()), ":emission": num(int64(decide.Emission(c.Policy))), ":e": num(next.Unix() + 1),
			},
			ConditionExpression: aws.String("attribute_not_exists(#t)"),
		}
		if read := d.states[i].TAT; !read.IsZero() {
			u.ConditionExpression = aws.String("#t = :read")
			u.ExpressionAttributeValues[":read"] = num(read.UnixNano())
		}
		items = append(items, types.TransactWriteItem{Update: u})
	}
	return items
}

// outcome reads the window counts back (the transactions returned none)
// and decides: they may include attempts after this one; the decision
// stands.
func (s *Store) outcome(ctx context.Context, d *decision, allowed bool) (decide.Outcome, error) {
	r := newReads()
	counters := make([]func() map[string]types.AttributeValue, len(d.keys))
	for i, k := range d.keys {
		if k != nil {
			counters[i] = r.add(k)
		}
	}
	if len(r.keys) > 0 {
		if err := s.read(ctx, r); err != nil {
			// The attempt was decided, and its writes are done: a read
			// failing now must not turn a decision into an error, which
			// would be answered by the fail mode as if nothing had been
			// counted.
			return d.estimate(allowed), nil
		}
	}
	for i, get := range counters {
		if get == nil {
			continue
		}
		n, err := numberOf(get(), attrCount)
		if err != nil {
			return decide.Outcome{}, s.failed(fault.Corrupt, "read counts", 1, err)
		}
		d.states[i].Cur = n
	}
	return decide.Decided(d.a, d.states, allowed), nil
}

// auditItem is the audit record of an allowed attempt, under its first
// check's key and window. Its random suffix keeps records of one instant
// and request id apart; it is drawn once per decision, so a repeated call
// sends the same record.
func (s *Store) auditItem(a limiter.Attempt) map[string]types.AttributeValue {
	first := a.Charges[0]
	start := decide.WindowStart(a.Now, first.Policy.Window)
	nonce := make([]byte, 6)
	crand.Read(nonce)
	calledAt := a.Now.UTC().Format(decide.CalledAtLayout)
	item := map[string]types.AttributeValue{
		attrPK:         str(AuditPartition(first.Key, start)),
		attrSK:         str(calledAt + "#" + a.RequestID + "#" + hex.EncodeToString(nonce)),
		"key":          str(first.Key),
		"window_start": str(decide.FormatWindow(start)),
		"called_at":    str(calledAt),
		"route":        str(a.Route),
		"request_id":   str(a.RequestID),
		"cost":         num(decide.Units(first)),
	}
	if s.cfg.AuditRetention > 0 {
		item[attrExpires] = num(a.Now.Add(s.cfg.AuditRetention).Unix())
	}
	return item
}
