package sqlite

import (
	"context"
	"database/sql"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Group commit.
//
// On EFS a transaction costs its round trips (locks, journal, fsyncs)
// whatever it writes, so a process that serves several requests at once
// (the local server, the middleware in a long-running server, a Lambda
// managed instance) decides the ones that arrive while a transaction of a
// shard is in flight together, in that shard's next transaction:
//
//   - A request that finds no transaction of its shard in flight in this
//     process runs one at once (in a busy process whose transactions
//     are short, after letting the goroutines ready to run go first, see
//     allow), with whatever queued meanwhile: a lone request waits for
//     nothing more than it did before batching.
//   - Requests that arrive meanwhile queue in arrival order. When the
//     transaction ends, the first of them leads the next: it takes the
//     queue (up to MaxBatch), decides each attempt in turn inside one
//     write transaction, each upsert seeing the counts of those before it,
//     each attempt keeping its own outcome and its own audit record (in
//     two statements for a run of window checks, bulk.go), commits,
//     answers each, and hands the lead to the next waiter. Its own
//     answer never waits for a later batch.
//   - After a batch of several, the turn lingers a moment for the next
//     requests of the clients it just answered, so that they form one
//     batch rather than a batch of one and one of the rest (see linger):
//     until as many wait as it answered, or the moment is over (a whole
//     transaction where its clients have been coming back within one, a
//     16th of one otherwise; 2 ms at most). Not where a 16th of a
//     transaction is shorter than minLinger (WAL on a local disk): there
//     the lock would stand idle for nothing.
//   - A request whose context ends while it queues is answered with its
//     context's error and left out. The batch's context is not any one
//     member's: it ends at the latest of their deadlines, so one member's
//     deadline cannot cancel the others' decisions, and the lock wait is
//     bounded by BusyTimeout as for any write.
//   - All commit together or none: a failed batch answers every member
//     with the error, and the fail mode answers each. (Retrying is not
//     safe in general: a COMMIT that failed may have committed.)
//
// A batch is at most one transaction (none when another process decided
// it, handoff.go), so one acquisition of the file lock: a
// process with many waiting decisions still has one waiter in the waiting
// room (wait.go), and the fairness between processes is unchanged.

// MaxBatch bounds the decisions one transaction decides. Each adds its
// pages to the journal (about one leaf per key when keys are spread), so
// an unbounded batch would hold the lock ever longer; 128 is far above the
// concurrency of one Lambda environment (a managed instance runs 64 at
// most), so there no decision waits for more than the transaction ahead of
// its own.
const MaxBatch = 128

// batcher is a shard's queue of decisions waiting for the transaction in
// flight, and the token that says one is in flight.
type batcher struct {
	mu     sync.Mutex
	active bool       // a transaction of this shard's (or a cross-shard one holding it) is in flight
	queue  []*pending // waiting, in arrival order

	batches, decided, largest atomic.Int64
	across                    atomic.Int64 // cross-shard decisions led from this shard
	handed, served            atomic.Int64 // attempts decided by another process, and for others (handoff.go)
	bulked                    atomic.Int64 // attempts decided in bulk (bulk.go)
	queuedAt                  atomic.Int64 // when a request last queued, in Unix nanoseconds

	// A lingering turn (see linger) passes to the first waiter once want
	// wait, or at until; gen tells its timer from a later linger's. It
	// began at began, had waiting when its batch was answered, its
	// transactions holding the lock for hold; a learning one is a whole
	// linger, not a 16th of one (lingerTime).
	lingering bool
	want      int
	until     time.Time
	gen       uint64
	began     time.Time
	had       int
	hold      time.Duration
	learning  bool
	// back is a moving average of how long a batch's clients take to
	// come back (see endLinger); 0 before a linger has learnt it. lingers
	// counts the lingers begun.
	back    time.Duration
	lingers int
}

// pending is one request waiting for a shard: an attempt to decide, or
// (token) a cross-shard transaction waiting for the shard's turn.
type pending struct {
	ctx   context.Context
	a     limiter.Attempt
	token bool
	ready chan struct{} // closed when state leaves queued
	state pendingState  // guarded by batcher.mu
	o     decide.Outcome
	err   error
	// cutShort: answered with its own context's error.
	cutShort bool
	// queued: it waited for a transaction in flight (turn).
	queued bool
}

type pendingState int

const (
	queued   pendingState = iota
	leading               // it has the turn: it runs the next transaction
	taken                 // in a batch another leads
	answered              // o and err are its answer
)

func newPending(ctx context.Context, a limiter.Attempt, token bool) *pending {
	return &pending{ctx: ctx, a: a, token: token, ready: make(chan struct{})}
}

// turn gives p the shard's turn at once if no transaction is in flight, or
// queues it and waits until it leads, is answered, or its context ends
// (then it is answered with that error). It reports whether p leads.
func (b *batcher) turn(p *pending) bool {
	b.mu.Lock()
	if !b.active {
		b.active, p.state = true, leading
		b.mu.Unlock()
		return true
	}
	b.queue = append(b.queue, p)
	p.queued = true
	now := time.Now()
	b.queuedAt.Store(now.UnixNano())
	// A cross-shard transaction ends a linger at once: the next batch
	// stops at it (take), so waiting longer would only delay it, and the
	// other shards whose turns it holds.
	if b.lingering && (len(b.queue) >= b.want || !now.Before(b.until) || p.token) {
		b.endLinger(now)
	}
	b.mu.Unlock()
	select {
	case <-p.ready:
	case <-p.ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch p.state {
	case leading:
		if p.ctx.Err() == nil {
			return true
		}
		b.handOffLocked() // chosen as its context ended: pass the turn on
	case queued:
		b.queue = dropped(b.queue, p)
	case answered:
		return false
	}
	// Queued or taken: its answer is its context's error. A taken attempt
	// may still be decided and committed by its batch, as a request whose
	// deadline passes during COMMIT may be.
	p.cut(false)
	return false
}

// cut answers p with its context's error, waking it if wake. The batcher's
// mu is held.
func (p *pending) cut(wake bool) {
	p.o, p.err, p.state, p.cutShort = decide.Outcome{}, p.ctx.Err(), answered, true
	if wake {
		close(p.ready)
	}
}

func dropped(q []*pending, p *pending) []*pending {
	for i, x := range q {
		if x == p {
			return append(q[:i], q[i+1:]...)
		}
	}
	return q
}

// linger ends the turn after a batch of several once the requests its
// members' clients send next have had a moment to arrive: as soon as as
// many wait as the batch answered plus those that waited behind it when
// it answered (before, queued: a client already back is not counted
// twice), most at most, or once d (lingerFor) has passed.
// Without it, in a busy process, the first of them to come back would
// find no transaction in flight and start one alone, the others would
// queue behind it, and the process's clients would split into a batch of
// one and a batch of the rest, each in turn. A lone request (after no
// batch of several) never meets a lingering turn.
//
// The arrivals end it (turn), not looks at the queue: it used to look in
// steps of 50 µs, but a sleep that short lasts about a millisecond here
// (Go's timers, on a machine otherwise idle: 1.09 ms on average for 50 µs,
// measured on this project's 2-core machine), so a linger meant to last a
// 16th of a 2 ms transaction left the lock idle up to half of one, and
// ended at the first step the queue did not grow, however many were still
// on their way. After d the first arrival ends it, without waiting for
// the timer, which may fire late; the timer ends a linger no request
// comes to (clients that stopped, or whose next request is for another
// shard).
func (b *batcher) linger(d time.Duration, answered, queued, most int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	want := min(queued+answered, most)
	if len(b.queue) >= want {
		b.handOffLocked()
		return
	}
	b.gen++
	now := time.Now()
	b.lingering, b.want, b.until = true, want, now.Add(d)
	b.began, b.had = now, queued
	gen := b.gen
	time.AfterFunc(d, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.lingering && b.gen == gen {
			b.endLinger(time.Now())
		}
	})
}

// endLinger passes a lingering turn on; a learning one (a whole linger)
// learns from it how long the batch's clients take to come back: the time
// it lasted, scaled by the share of those it waited for that came (the
// batch's clients, those back before it began among them, not those that
// were already waiting when the batch was answered): half back in 0.2 ms,
// 0.4 ms. Twice a whole linger at most, and that with none back: anything
// above a whole linger means slow, and a larger sample (none of 32 back,
// 54 ms) took some 200 batches to unlearn. Requests of other clients
// count as the batch's, so under a load of many clients each paced by
// its own clock (not waiting for its answer to send again) it is the time
// that many requests take to arrive. A 16th of a transaction is too short
// to tell: in the local server's two groups of 16 clients none was back
// within it, and a linger no one came back to, scaled as if one had,
// taught a batch of two that nobody came back to that they came back in
// 0.2 ms. It ends at now; the batcher's mu is held.
func (b *batcher) endLinger(now time.Time) {
	b.lingering = false
	if b.learning {
		whole := wholeLinger(b.hold)
		waited := b.want - b.had
		sample := 2 * whole
		if came := min(len(b.queue)-b.had, waited); came > 0 {
			sample = min(now.Sub(b.began)*time.Duration(waited)/time.Duration(came), sample)
		}
		if b.back == 0 {
			b.back = sample
		} else {
			b.back += (sample - b.back) / 4
		}
	}
	b.handOffLocked()
}

// exploreEvery: every so many lingers, one is a whole linger whatever was
// learnt, to learn again: clients that start coming back quickly are seen
// at the next such linger, each of which moves what was learnt a quarter
// of the way.
const exploreEvery = 16

// lingerTime is how long the turn lingers after a batch of several, its
// transactions holding the lock for hold (lingerFor): a whole linger where
// the batch's clients have been coming back within one, and every
// exploreEvery-th linger, which is how lingers learn; a 16th of a
// transaction otherwise; none in WAL on a local disk.
func (b *batcher) lingerTime(hold time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lingers++
	d := lingerFor(hold, b.back, b.lingers%exploreEvery == 0)
	b.hold, b.learning = hold, d > 0 && d == wholeLinger(hold)
	return d
}

// wholeLinger is the longest a turn lingers when its transactions hold
// the lock for hold: one of them, 2 ms at most.
func wholeLinger(hold time.Duration) time.Duration { return min(hold, 2*time.Millisecond) }

// minLinger is the shortest linger tried: the earlier design's floor (a
// linger had to last one 50 µs look at the queue), kept because where a
// 16th of a transaction is below it (WAL on a local disk) lingers of half
// and a whole transaction, 85-170 µs, gained nothing measurable
// (BENCHMARKS.md, "Thirteenth run"), and a whole one, 0.3 ms, cost 15%
// of the local server's throughput (BENCHMARKS.md, "Eighteenth run").
const minLinger = 50 * time.Microsecond

// lingerFor is how long the turn lingers after a batch of several when a
// transaction holds the lock for hold and the batch's clients have taken
// back to come back (0: not learnt yet). Where they come back within a
// transaction, 2 ms at most (a busy local server, each client sending
// again once answered), that long (wholeLinger): gathering them all in one
// batch saves one transaction's fixed cost (in DELETE on a local disk,
// four fsyncs and an unlink, 1.2 of its 1.7 ms) for a wait no longer than
// it, and a busy local server decides up to 16% more (BENCHMARKS.md,
// "Eighteenth run" to "Twentieth run"). Otherwise a 16th of it, at most
// 2 ms, enough for a client or two close behind: a longer wait for
// clients who are not coming would delay those queued for nothing. And not at all when a 16th
// is less than minLinger: in WAL on a local disk, where a batch holds the
// lock for about 0.3 ms, the lock would stand idle for nothing. explore
// asks for a whole linger, to learn back again.
func lingerFor(hold, back time.Duration, explore bool) time.Duration {
	switch {
	case shortHold(hold):
		return 0
	case explore || back > 0 && back <= wholeLinger(hold):
		return wholeLinger(hold)
	default:
		return min(hold/16, 2*time.Millisecond)
	}
}

// shortHold reports whether transactions that hold the lock for hold are
// too short for a turn to linger after them (lingerFor).
func shortHold(hold time.Duration) bool { return hold/16 < minLinger }

// yieldsFirst reports whether a request that finds no transaction in
// flight lets the goroutines ready to run go first (allow), where
// transactions hold the lock for hold and a request last had to queue
// for the shard since ago. Only where no turn lingers (shortHold): there
// the linger gathers the clients, and the yield measured slower. And
// only where requests have queued within contendedWithin: a goroutine
// that yields waits behind every one ready to run, which need not be
// requests (work that computes, in a server that also does other
// things, for its time slice: 10 ms, holding the shard's turn), so a
// process whose requests come one at a time never yields.
func yieldsFirst(hold, since time.Duration) bool {
	return shortHold(hold) && since < contendedWithin
}

// contendedWithin is how recently a request must have queued for a shard
// for its next leader to yield (yieldsFirst): a busy local server queues
// every few hundred microseconds.
const contendedWithin = 10 * time.Millisecond

// sinceQueued is how long ago a request last queued (turn).
func (b *batcher) sinceQueued() time.Duration {
	return time.Duration(time.Now().UnixNano() - b.queuedAt.Load())
}

func (b *batcher) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// take returns the batch leader leads: itself, then the attempts queued
// after it, in arrival order, up to most in all and up to the first
// cross-shard transaction waiting (which keeps its place). Members whose
// context has ended are answered with its error and left out.
func (b *batcher) take(leader *pending, most int) []*pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := []*pending{leader}
	n := 0
	for n < len(b.queue) && len(batch) < most && !b.queue[n].token {
		p := b.queue[n]
		n++
		p.state = taken
		if p.ctx.Err() != nil {
			p.cut(true)
			continue
		}
		batch = append(batch, p)
	}
	b.queue = b.queue[n:]
	if leader.ctx.Err() != nil {
		leader.cut(false)
		batch = batch[1:]
	}
	return batch
}

// answer gives every member of batch its outcome, or err, and returns how
// many waited for the turn then.
func (b *batcher) answer(batch []*pending, outs []decide.Outcome, err error) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range batch {
		if p.state == answered { // its context ended while it was taken
			continue
		}
		p.o, p.err = decide.Outcome{}, err
		if err == nil {
			p.o = outs[i]
		}
		wasLeader := p.state == leading
		p.state = answered
		if !wasLeader {
			close(p.ready)
		}
	}
	return len(b.queue)
}

// handOff ends the turn: the first waiter leads next, or no transaction
// is in flight any more.
func (b *batcher) handOff() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handOffLocked()
}

func (b *batcher) handOffLocked() {
	if len(b.queue) == 0 {
		b.active = false
		return
	}
	next := b.queue[0]
	b.queue = b.queue[1:]
	next.state = leading
	close(next.ready)
}

// allow decides a, whose charges all fall into sh, in sh's next
// transaction, with whatever else is waiting for it.
func (sh *shard) allow(ctx context.Context, a limiter.Attempt) (decide.Outcome, error) {
	p := newPending(ctx, a, false)
	if !sh.batch.turn(p) {
		return sh.answerOf(p)
	}
	if !p.queued && yieldsFirst(sh.wait.holdTime(), sh.batch.sinceQueued()) {
		// A request that found no transaction in flight, in a process
		// whose requests have been queueing for this shard, lets the
		// goroutines ready to run go first, once: those are mostly
		// requests about to ask for a turn, which then queue behind it
		// and join its batch instead of waiting for the next. Where
		// transactions are short, and no turn lingers (lingerFor), a
		// busy process otherwise alternated a batch of one with a batch
		// of the rest: the store's load test (32 clients, WAL) decided
		// 7.1-7.5 decisions a batch without the yield, 14.8-15.0 with
		// it, and 15% more a second (BENCHMARKS.md, "Twenty-first
		// run"). With nothing else ready to run, it returns at once.
		runtime.Gosched()
	}
	batch := sh.batch.take(p, sh.maxBatch())
	queued := 0
	if len(batch) > 0 {
		outs, err := sh.decideBatch(batch)
		queued = sh.batch.answer(batch, outs, err)
	}
	// The turn passes on, later when it lingers: a leader's own answer
	// never waits for a later batch.
	var d time.Duration
	if len(batch) > 1 {
		d = sh.batch.lingerTime(sh.wait.holdTime())
	}
	if d > 0 {
		sh.batch.linger(d, len(batch), queued, sh.maxBatch())
	} else {
		sh.batch.handOff()
	}
	return sh.answerOf(p)
}

// maxBatch is the most decisions one of sh's transactions decides.
func (sh *shard) maxBatch() int {
	if sh.cfg.MaxBatch <= 0 {
		return MaxBatch
	}
	return sh.cfg.MaxBatch
}

// answerOf is p's answer, an error of its own context's wrapped as the
// store's errors are.
func (sh *shard) answerOf(p *pending) (decide.Outcome, error) {
	if p.cutShort {
		return decide.Outcome{}, sh.wrap("decide", p.err)
	}
	return p.o, p.err
}

// decideBatch decides every member of batch in turn, in one write
// transaction, and returns their outcomes, or the error that failed them
// all.
func (sh *shard) decideBatch(batch []*pending) ([]decide.Outcome, error) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	outs := make([]decide.Outcome, len(batch))
	var ho *handOff
	if sh.handsOff() {
		if ho = newHandOff(sh, batch, sh.handOffDeadline(ctx, time.Now().Add(sh.cfg.BusyTimeout))); ho != nil {
			defer ho.done()
		}
	}
	served, bulked := 0, 0
	var used *handle
	err := sh.writeHanding(ctx, "decide", func(tx *sql.Tx, h *handle) error {
		used = h
		st := h.stmts.in(ctx, tx)
		at := func(string) *statements { return st }
		if ho != nil {
			if err := ho.claim(ctx, tx); err != nil {
				return err
			}
		}
		var todo []int
		var as []limiter.Attempt
		for i, p := range batch {
			if ho != nil && ho.got[i] {
				outs[i] = ho.outs[i]
				continue
			}
			todo, as = append(todo, i), append(as, p.a)
		}
		decided, n, err := decideInOrder(ctx, tx, h, st, as)
		if err != nil {
			return err
		}
		for j, i := range todo {
			outs[i] = decided[j]
		}
		bulked = n
		if err := beforeCommit(sh.path); err != nil {
			return err
		}
		if ho == nil {
			return nil
		}
		served, err = sh.serve(ctx, tx, ho, at, sh.maxBatch()-len(batch))
		return err
	}, ho)
	if ho != nil {
		sh.requests.endServing()
	}
	if err != nil && ho != nil && ho.allGot() {
		// Its transaction failed after reading, under the lock, that
		// another process had decided every attempt: those are its answer.
		ho.answered, err = true, nil
	}
	if err != nil {
		return nil, err
	}
	if used != nil && used.bulk.wanted() {
		// On a handle it holds a reference to, so that it is not
		// closed under the prepare.
		if h, err := sh.acquire(ctx); err == nil {
			h.bulk.prepareWanted(ctx, h.db)
			sh.release(h)
		}
	}
	if ho != nil {
		sh.batch.handed.Add(int64(ho.found))
		if ho.answered {
			copy(outs, ho.outs)
			return outs, nil // no transaction of its own
		}
	}
	sh.batch.served.Add(int64(served))
	sh.batch.bulked.Add(int64(bulked))
	sh.batch.batches.Add(1)
	sh.batch.decided.Add(int64(len(batch)))
	storeMax(&sh.batch.largest, int64(len(batch)))
	return outs, nil
}

// batchContext is the context of a batch's transaction. A lone attempt's
// is its own. A batch's carries the first member's values, is cancelled by
// none of them, and ends at the latest of their deadlines (none if one has
// none): the wait for the lock is bounded by BusyTimeout all the same.
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	var latest time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(batch[0].ctx))
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}
