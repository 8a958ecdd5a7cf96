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
// transaction that ends with both clients it answered back, 4 ms after it
// began, teaches 4 ms; one that ends with one of four back, 3 ms after it
// began, teaches 12 ms (four times as long), moved an eighth of the way
// from what was learnt: 5 ms. A request of a client that was waiting
// before it began is not one back; a linger of a whole transaction no one
// came back to teaches twice a transaction; a linger of a 16th of one
// teaches nothing (a tester's finding: one that nobody came back to, after
// a batch of two, taught 0.2 ms, and the next lasted a whole transaction
// for nobody).
func TestALingerLearnsHowFastClientsComeBack(t *testing.T) {
	var b batcher
	began := time.Unix(1_800_000_000, 0)
	end := func(learning bool, answered, had, back int, after time.Duration) time.Duration {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.active, b.lingering, b.began, b.had, b.answered = true, true, began, had, answered
		b.hold, b.learning = 1700*time.Microsecond, learning
		b.queue = make([]*pending, had+back)
		for i := range b.queue {
			b.queue[i] = newPending(context.Background(), limiter.Attempt{}, false)
		}
		b.endLinger(began.Add(after))
		return b.back
	}
	if got := end(true, 2, 0, 2, 4*time.Millisecond); got != 4*time.Millisecond {
		t.Errorf("both back in 4 ms: learnt %v, want 4ms", got)
	}
	if got := end(true, 4, 1, 1, 3*time.Millisecond); got != 5*time.Millisecond {
		t.Errorf("one of four back in 3 ms, after 4 ms: learnt %v, want 5ms", got)
	}
	b = batcher{}
	if got := end(false, 2, 3, 0, 100*time.Microsecond); got != 0 {
		t.Errorf("none of two back in a short linger: learnt %v, want nothing", got)
	}
	if got := end(false, 2, 0, 1, 100*time.Microsecond); got != 0 {
		t.Errorf("one of two back in a short linger: learnt %v, want nothing", got)
	}
	if got := end(true, 2, 3, 0, 1700*time.Microsecond); got != 3400*time.Microsecond {
		t.Errorf("none of two back in a whole transaction of 1.7 ms: learnt %v, want twice that", got)
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
