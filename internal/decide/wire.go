package decide

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// An Outcome kept outside the process that decided it: a store that
// decides an attempt for another process (the SQLite store's hand-off)
// writes it down, and the other reads it back as if it had decided it
// itself. Everything a caller or the reject cache reads comes back,
// including what each decision was made from; Refused does not (an
// attempt refused as impossible is never handed back: nothing was
// written, and its own process decides it again), nor FromMemory, which
// no store sets. V is wireVersion: an outcome of another version is
// refused, never guessed at.
type wireOutcome struct {
	V         int            `json:"v"`
	Allowed   bool           `json:"allowed"`
	Decisions []wireDecision `json:"decisions"`
}

const wireVersion = 1

type wireDecision struct {
	limiter.Decision
	TAT   time.Time `json:"tat"`
	Moved bool      `json:"moved"`
	State State     `json:"state"`
}

// MarshalOutcome encodes o for UnmarshalOutcome. It refuses a refused or
// remembered outcome, which is never handed over.
func MarshalOutcome(o Outcome) ([]byte, error) {
	if o.Refused != nil || o.FromMemory {
		return nil, fmt.Errorf("decide: a refused or remembered outcome is not written down")
	}
	w := wireOutcome{V: wireVersion, Allowed: o.Allowed, Decisions: make([]wireDecision, len(o.Decisions))}
	for i, d := range o.Decisions {
		w.Decisions[i] = wireDecision{Decision: d.Decision, TAT: d.TAT, Moved: d.Moved, State: d.state}
	}
	return json.Marshal(w)
}

// UnmarshalOutcome is the Outcome MarshalOutcome encoded.
func UnmarshalOutcome(b []byte) (Outcome, error) {
	var w wireOutcome
	if err := json.Unmarshal(b, &w); err != nil {
		return Outcome{}, fmt.Errorf("decide: read an outcome: %w", err)
	}
	if w.V != wireVersion {
		return Outcome{}, fmt.Errorf("decide: an outcome of version %d, not %d", w.V, wireVersion)
	}
	o := Outcome{Allowed: w.Allowed, Decisions: make([]Decision, len(w.Decisions))}
	for i, d := range w.Decisions {
		o.Decisions[i] = Decision{Decision: d.Decision, TAT: d.TAT, Moved: d.Moved, state: d.State}
	}
	return o, nil
}
