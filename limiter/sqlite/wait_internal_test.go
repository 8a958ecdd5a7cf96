package sqlite

import (
	"testing"
	"time"
)

// TestALongWaitCostsTensOfLooks: a process that has never held the lock
// (its guess of a transaction a local disk's millisecond) waiting one
// second for a holder on slow storage looks at the lock tens of times, not
// thousands (each look a round trip on EFS, and CPU): about 2,000 when its
// pace stayed at half its guess. And it does not look too late: no pause
// is longer than an eighth of its wait so far, jittered, or maxPoll.
func TestALongWaitCostsTensOfLooks(t *testing.T) {
	w := &waiter{store: &contention{}}
	looks := 0
	for waited := time.Duration(0); waited < time.Second; looks++ {
		d := w.pause(waited, true)
		if limit := max(3*max(initialHold, waited/4)/4, minPoll); d > min(limit, maxPoll) {
			t.Fatalf("after %v: a pause of %v, more than %v", waited, d, min(limit, maxPoll))
		}
		waited += d
	}
	if looks > 150 {
		t.Errorf("a wait of 1 s looked %d times, want tens", looks)
	}
	t.Logf("%d looks", looks)
}

// TestAWaitLooksUntilItsBudgetEnds: a waiter gives up only when its budget
// (BusyTimeout) is spent, less the room its last look leaves for a try
// (lastTry), not a pause before it. A last look skipped because the next
// pause would overrun the budget gave up up to 50 ms early (a pause at a
// long wait's pace), and a lock freed in that time went to another
// process while this one's client was told the store was busy. A last
// look at the budget's very end had no time left for its try.
func TestAWaitLooksUntilItsBudgetEnds(t *testing.T) {
	w := &waiter{store: &contention{}}
	for _, budget := range []time.Duration{10 * time.Millisecond, 300 * time.Millisecond, time.Second, 5 * time.Second} {
		room := min(lastTry, budget/10)
		for range 50 {
			waited := time.Duration(0)
			for {
				d, ok := w.pauseWithin(waited, budget, true)
				if !ok {
					break
				}
				waited += d
			}
			if left := budget - waited; left < room || left >= room+minPoll {
				t.Fatalf("a wait of %v gave up after %v: want its last look %v before the budget's end, within %v", budget, waited, room, minPoll)
			}
		}
	}
}
