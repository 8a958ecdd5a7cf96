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
