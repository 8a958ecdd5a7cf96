package sqlite

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// arrive queues one request on b from a goroutine of its own and waits
// until it is in the queue; leads receives its index if it gets the turn.
func arrive(t *testing.T, b *batcher, i int, leads chan<- int) *pending {
	t.Helper()
	p := newPending(context.Background(), limiter.Attempt{}, false)
	go func() {
		if b.turn(p) {
			leads <- i
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		in := slices.Contains(b.queue, p) || p.state != queued
		b.mu.Unlock()
		if in {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("a request did not queue in 10 s")
		}
	}
}

// led is the index the turn went to, within 10 s (a bound on a hang, not
// a timing).
func led(t *testing.T, leads <-chan int) int {
	t.Helper()
	select {
	case i := <-leads:
		return i
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not pass in 10 s")
		return -1
	}
}

// finish answers the leader's batch so that every goroutine of a test ends.
func finish(b *batcher, leader *pending) {
	batch := b.take(leader, MaxBatch)
	b.answer(batch, make([]decide.Outcome, len(batch)), nil)
	b.handOff()
}

// TestALingerWaitsForTheClientsItAnswered: after a batch of three, with
// nothing waiting behind it, the turn passes once the three clients'
// next requests wait, not when two of them have come and the third is a
// moment later, and at once when the third comes: the three form one
// batch. (It used to look at the queue in steps and end at the first step
// it had not grown: it passed the turn with two.)
func TestALingerWaitsForTheClientsItAnswered(t *testing.T) {
	var b batcher
	b.active = true
	b.linger(time.Hour, 3, 0, MaxBatch)
	leads := make(chan int, 3)
	first := arrive(t, &b, 0, leads)
	arrive(t, &b, 1, leads)
	time.Sleep(20 * time.Millisecond) // the third client is slow
	select {
	case i := <-leads:
		t.Fatalf("the turn passed to request %d with two of three back", i)
	default:
	}
	arrive(t, &b, 2, leads)
	if i := led(t, leads); i != 0 {
		t.Fatalf("the turn passed to request %d, want the first to arrive", i)
	}
	if n := b.waiting(); n != 2 {
		t.Errorf("%d wait behind the new leader, want the other two", n)
	}
	finish(&b, first)
}

// TestALingerEndsInItsTime: clients that do not all come back hold the
// turn no longer than the linger: its timer passes it to the one that
// came, and a request that arrives after the linger's time takes it at
// once, its timer not yet run. A linger never waits for more than a batch
// holds.
func TestALingerEndsInItsTime(t *testing.T) {
	for _, c := range []struct {
		name                   string
		d                      time.Duration
		answered, most, arrive int
		over                   bool // its time over, its timer not yet run
	}{
		{"timer", 5 * time.Millisecond, 3, MaxBatch, 1, false},
		{"late arrival", time.Hour, 3, MaxBatch, 1, true},
		{"most", time.Hour, 5, 2, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b batcher
			b.active = true
			b.linger(c.d, c.answered, 0, c.most)
			if c.over {
				b.mu.Lock()
				b.until = time.Now().Add(-time.Millisecond)
				b.mu.Unlock()
			}
			leads := make(chan int, c.arrive)
			first := arrive(t, &b, 0, leads)
			for i := 1; i < c.arrive; i++ {
				arrive(t, &b, i, leads)
			}
			if i := led(t, leads); i != 0 {
				t.Fatalf("the turn passed to %d", i)
			}
			finish(&b, first)
		})
	}
}

// A client whose next request is back before the turn begins to linger
// (between the batch's answers and the linger) is one of those it waits
// for, not one more: the linger ends when the other two are back, not at
// its time (the reviewer's case: it waited for a fourth that never came).
func TestALingerCountsAClientBackBeforeItStarts(t *testing.T) {
	var b batcher
	b.active = true
	leads := make(chan int, 3)
	first := arrive(t, &b, 0, leads) // back before the linger
	b.linger(time.Hour, 3, 0, MaxBatch)
	arrive(t, &b, 1, leads)
	arrive(t, &b, 2, leads)
	if i := led(t, leads); i != 0 {
		t.Fatalf("the turn passed to %d", i)
	}
	finish(&b, first)
}

// TestALingerLearnsHowFastClientsComeBack: a linger of a whole
// transaction (learning) that ends with both clients it waited for back,
// 0.4 ms after it began, teaches 0.4 ms; one that ends with one of four
// back, 0.3 ms after it began, teaches 1.2 ms (four times as long), moved
// a quarter of the way from what was learnt: 0.6 ms. A client already
// waiting when the batch was answered is not one back; one back before
// the linger began is. A sample is at most twice a whole linger: none
// back teaches that, however many were waited for (a reviewer's finding:
// none of 32 back taught 54 ms, and 192 batches passed before the turn
// lingered long again). A linger of a 16th of a transaction teaches
// nothing (a tester's finding: one that nobody came back to, after a
// batch of two, taught 0.2 ms, and the next lasted a whole transaction
// for nobody).
func TestALingerLearnsHowFastClientsComeBack(t *testing.T) {
	var b batcher
	began := time.Unix(1_800_000_000, 0)
	// end ends a linger after a batch of answered, queued waiting when it
	// was answered, back of the batch's clients waiting, after: what it
	// learns.
	end := func(learning bool, hold time.Duration, answered, queued, back, most int, after time.Duration) time.Duration {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.active, b.lingering, b.began, b.had, b.want = true, true, began, queued, min(queued+answered, most)
		b.hold, b.learning = hold, learning
		b.queue = make([]*pending, queued+back)
		for i := range b.queue {
			b.queue[i] = newPending(context.Background(), limiter.Attempt{}, false)
		}
		b.endLinger(began.Add(after))
		return b.back
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, c := range []struct {
		name                         string
		learning                     bool
		hold                         time.Duration
		answered, queued, back, most int
		after, was, want             time.Duration
	}{
		{"both back", true, ms(1.7), 2, 0, 2, MaxBatch, ms(0.4), 0, ms(0.4)},
		{"one of four back, three waiting", true, ms(1.7), 4, 3, 1, MaxBatch, ms(0.3), ms(0.4), ms(0.6)},
		{"none of 32 back", true, ms(1.7), 32, 0, 0, MaxBatch, ms(1.7), 0, ms(3.4)},
		{"none back, a transaction of 10 ms", true, ms(10), 2, 0, 0, MaxBatch, ms(2), 0, ms(4)},
		{"one of 32 back", true, ms(1.7), 32, 0, 1, MaxBatch, ms(1.7), 0, ms(3.4)},
		{"waited for most, not all it answered", true, ms(1.7), 8, 2, 2, 4, ms(0.2), 0, ms(0.2)},
		{"a short linger", false, ms(1.7), 2, 3, 0, MaxBatch, ms(0.1), ms(0.5), ms(0.5)},
		{"a short linger, one back", false, ms(1.7), 2, 0, 1, MaxBatch, ms(0.1), 0, 0},
	} {
		b = batcher{back: c.was}
		if got := end(c.learning, c.hold, c.answered, c.queued, c.back, c.most, c.after); got != c.want {
			t.Errorf("%s: learnt %v, want %v", c.name, got, c.want)
		}
	}
}

// TestALingerExploresEverySixteenth: with nothing learnt, or clients
// learnt to be slow, a turn lingers a 16th of a transaction, except every
// 16th linger, a whole one, which learns; with clients learnt to be
// quick, every linger is a whole one and learns.
func TestALingerExploresEverySixteenth(t *testing.T) {
	hold := 1700 * time.Microsecond
	for _, back := range []time.Duration{0, 2 * hold} {
		b := batcher{back: back}
		for i := 1; i <= 2*exploreEvery; i++ {
			d, want := b.lingerTime(hold), hold/16
			if i%exploreEvery == 0 {
				want = hold
			}
			if d != want || b.learning != (want == hold) {
				t.Errorf("clients back in %v, linger %d: %v, learning %v; want %v", back, i, d, b.learning, want)
			}
		}
	}
	b := batcher{back: hold / 2}
	for i := 1; i <= exploreEvery; i++ {
		if d := b.lingerTime(hold); d != hold || !b.learning {
			t.Errorf("clients back in %v, linger %d: %v, learning %v; want %v, learning", hold/2, i, d, b.learning, hold)
		}
	}
	// In WAL on a local disk, never.
	b = batcher{}
	for i := 1; i <= exploreEvery; i++ {
		if d := b.lingerTime(300 * time.Microsecond); d != 0 || b.learning {
			t.Errorf("a transaction of 0.3 ms, linger %d: %v, learning %v; want none", i, d, b.learning)
		}
	}
}

// TestACrossShardTransactionEndsALinger: a cross-shard transaction that
// queues during a linger ends it at once (the next batch stops at it, and
// it holds other shards' turns), not at the linger's time (a reviewer's
// finding: it waited out a 50 ms linger).
func TestACrossShardTransactionEndsALinger(t *testing.T) {
	var b batcher
	b.active = true
	b.linger(time.Hour, 3, 0, MaxBatch)
	token := newPending(context.Background(), limiter.Attempt{}, true)
	leads := make(chan int, 1)
	go func() {
		if b.turn(token) {
			leads <- 0
		}
	}()
	led(t, leads)
	b.handOff()
}
