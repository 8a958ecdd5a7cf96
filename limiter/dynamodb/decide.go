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
// applied, and what it is decided from, as read or as a cancelled
// transaction last saw it.
type decision struct {
	a limiter.Attempt // with the effective policies
	// states are each charge's counters before the attempt: Cur is the
	// current window's count without the attempt's cost (see after).
	states []decide.State
	keys   []map[string]types.AttributeValue // each window check's counter; nil for GCRA
}

// Allow counts the attempt under each charge and decides it; see the
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
	d, err := s.prepare(ctx, a)
	if err != nil {
		return decide.Outcome{}, err
	}
	audit := s.auditItem(a) // one record, whichever try writes it
	for try := 1; ; try++ {
		o := decide.Decide(d.a, d.after())
		if !o.Allowed {
			return d.deny(ctx, s, o), nil
		}
		w := d.writes(s, o, audit)
		err := s.transact(ctx, "decide", w.items)
		var failed *conditionFailed
		switch {
		case err == nil:
			return o, nil
		case !errors.As(err, &failed):
			return decide.Outcome{}, err
		}
		// Other decisions filled a counter or moved a bucket since this
		// one read it: decide again from the items as the cancellation
		// gives them, or, when it gives none, from a new read.
		fresh, bucketMoved, err := d.update(w, failed)
		if err != nil {
			return decide.Outcome{}, s.failed(fault.Corrupt, "decide", try, err)
		}
		if try > 1 && (bucketMoved || !fresh) {
			// Decisions keep moving this key's bucket: spread them out.
			// (A full counter denies the next try.)
			if err := pause(ctx); err != nil {
				return decide.Outcome{}, s.failed(fault.Busy, "decide", try, failed)
			}
		}
		if !fresh {
			if d, err = s.prepare(ctx, a); err != nil {
				return decide.Outcome{}, err
			}
		}
	}
}

// deny counts a denied attempt under every window policy, all or none,
// without conditions: counts only grow, so whatever raced in since the
// read, the attempt stays denied. GCRA buckets do not move for a denied
// attempt. If the write fails, the attempt is denied all the same,
// uncounted: answering an error would let it through under FAIL_MODE
// open, the one answer it must not get.
func (d *decision) deny(ctx context.Context, s *Store, o decide.Outcome) decide.Outcome {
	var items []types.TransactWriteItem
	for i := range d.a.Charges {
		if d.keys[i] != nil {
			items = append(items, d.count(s, i, false))
		}
	}
	if len(items) > 0 {
		s.transact(ctx, "count denied", items) // failed or not, denied
	}
	return o
}

// after are the states with the attempt counted: each window's count as
// read plus the attempt's cost, at most decide.CountCap.
func (d *decision) after() []decide.State {
	st := append([]decide.State(nil), d.states...)
	for i, c := range d.a.Charges {
		if d.keys[i] != nil {
			st[i].Cur = plus(st[i].Cur, decide.Units(c))
		}
	}
	return st
}

// plus is n + cost, saturating at decide.CountCap.
func plus(n, cost int64) int64 {
	if n > decide.CountCap-cost {
		return decide.CountCap
	}
	return n + cost
}

// writes are the items of an allowed attempt's transaction and, for each,
// the check it belongs to (-1 for the audit record).
type writes struct {
	items  []types.TransactWriteItem
	checks []int
}

// writes is the transaction that lets the attempt through as o decided it:
// each window counter gets the attempt's cost, on condition, for an
// enforced policy, that it still has room for it; each GCRA bucket the
// attempt passes moves, on condition that it is where it was read; and
// the audit record is put. Each condition asks for the item as it is when
// it fails, to decide again from without another read.
func (d *decision) writes(s *Store, o decide.Outcome, audit map[string]types.AttributeValue) writes {
	var w writes
	for i, c := range d.a.Charges {
		switch {
		case d.keys[i] != nil:
			w.items = append(w.items, d.count(s, i, !c.Policy.Shadow))
		case o.Decisions[i].Moved:
			w.items = append(w.items, d.bucket(s, i, o.Decisions[i]))
		default:
			continue // a shadow GCRA policy that would deny: its bucket stays
		}
		w.checks = append(w.checks, i)
	}
	w.items = append(w.items, types.TransactWriteItem{Put: &types.Put{TableName: &s.cfg.Table, Item: audit}})
	w.checks = append(w.checks, -1)
	return w
}

// count is the update that adds the attempt's cost to window check i's
// counter; when conditional, on condition that the counter has room for
// it. (A condition that the count is still the one read would make the
// count the decision reports exact under races too, but every decision in
// between cancels it: with two clients on one key, every other
// transaction was cancelled, three requests a decision; see
// BENCHMARKS.md.)
func (d *decision) count(s *Store, i int, conditional bool) types.TransactWriteItem {
	c := d.a.Charges[i]
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
	if conditional {
		// The cost fits while the count is below fitsBelow: the most the
		// count may be with the cost added (for a sliding policy, the
		// limit less the previous window's weighted count), less the
		// cost, plus one.
		fitsBelow := decide.MaxCount(c.Policy, d.a.Now, d.states[i].Prev) - decide.Units(c) + 1
		u.ConditionExpression = aws.String("attribute_not_exists(#c) OR #c < :fits_below")
		u.ExpressionAttributeValues[":fits_below"] = num(fitsBelow)
		u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return types.TransactWriteItem{Update: u}
}

// bucket is the write that moves GCRA check i's bucket to where g, the
// check's decision, left it, on condition that it is where it was read,
// so that two decisions never both move it from the same place (the
// over-admission of a read, then a blind write).
func (d *decision) bucket(s *Store, i int, g decide.Decision) types.TransactWriteItem {
	c := d.a.Charges[i]
	next := g.TAT
	u := &types.Update{
		TableName:                &s.cfg.Table,
		Key:                      BucketKey(c.Policy, c.Key),
		UpdateExpression:         aws.String("SET #t = :next, #m = :emission, #e = :e"),
		ExpressionAttributeNames: map[string]string{"#t": attrTAT, "#m": attrEmission, "#e": attrExpires},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":next": num(next.UnixNano()), ":emission": num(int64(decide.Emission(c.Policy))), ":e": num(next.Unix() + 1),
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#t)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if read := d.states[i].TAT; !read.IsZero() {
		u.ConditionExpression = aws.String("#t = :read")
		u.ExpressionAttributeValues[":read"] = num(read.UnixNano())
	}
	return types.TransactWriteItem{Update: u}
}

// update takes into d the items whose conditions failed in w's
// transaction, as the cancellation gives them. fresh reports whether it
// gave every one: an item that no longer exists comes back without one
// (a bucket Reset deleted), and then only a new read tells. bucketMoved
// reports a GCRA bucket among them.
func (d *decision) update(w writes, failed *conditionFailed) (fresh, bucketMoved bool, err error) {
	if len(failed.items) == 0 {
		return false, false, nil
	}
	for k, n := range failed.items {
		if n >= len(w.checks) || w.checks[n] < 0 || failed.old[k] == nil {
			return false, false, nil
		}
		i, item := w.checks[n], failed.old[k]
		if d.keys[i] == nil {
			st, err := bucketState(item)
			if err != nil {
				return false, false, err
			}
			d.states[i].TAT, d.states[i].Emission = st.TAT, st.Emission
			bucketMoved = true
			continue
		}
		cur, err := numberOf(item, attrCount)
		if err != nil {
			return false, false, err
		}
		d.states[i].Cur = cur
	}
	return true, bucketMoved, nil
}

// prepare reads, in one round trip, everything a's charges are decided
// from: every key's override, the current window's counter and, for a
// sliding policy, the previous one's, and GCRA buckets.
func (s *Store) prepare(ctx context.Context, a limiter.Attempt) (*decision, error) {
	r := newReads()
	states := make([]func() (decide.State, error), len(a.Charges))
	overrides := make([]func() map[string]types.AttributeValue, len(a.Charges))
	for i, c := range a.Charges {
		states[i] = r.state(c.Policy, c.Key, a.Now, true)
		overrides[i] = r.add(OverrideKey(c.Policy, c.Key))
	}
	if err := s.read(ctx, r); err != nil {
		return nil, err
	}
	n := len(a.Charges)
	d := &decision{a: a, states: make([]decide.State, n), keys: make([]map[string]types.AttributeValue, n)}
	d.a.Charges = make([]limiter.Charge, n)
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

// auditItem is the audit record of an allowed attempt, under its first
// charge's key and window. Its random suffix keeps records of one instant
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
