// Package metrics writes the limiter's metrics as CloudWatch Embedded Metric
// Format: JSON lines that CloudWatch Logs turns into metrics as it ingests
// them, with no agent and no API call on the request path.
//
// Namespace (default "RateLimit"; the template sets one per stack):
//
//   - Requests (Count), by Policy, Route and Decision, and by Policy, Tier
//     and Decision: one per policy and request, Decision being allowed,
//     rejected or shadow_rejected (a shadow policy that would have
//     rejected), Tier the tier in force (a configured tier's name, or
//     "default" for the policy's own limit: never a value a client
//     chose, so a client cannot mint dimensions).
//   - DecisionLatency (Milliseconds), by the same dimensions: how long the
//     store took to decide the request (not written for denials a
//     RejectCache made from memory).
//   - StoreErrors (Count), by Route, by Fault, and with no dimension at all
//     (so one alarm covers every route): requests the store failed to
//     decide, which the fail mode answered. Fault is the failure's class
//     (fault.Class: busy, unavailable, corrupt, schema, journal_mode), so
//     that an alarm on the classes that do not clear by themselves can say
//     "corrupt" rather than "busy".
package metrics

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// DefaultNamespace is the CloudWatch namespace when none is configured.
const DefaultNamespace = "RateLimit"

// Decisions, as the Decision dimension spells them.
const (
	Allowed        = "allowed"
	Rejected       = "rejected"
	ShadowRejected = "shadow_rejected"
)

// EMF writes metric lines to W. It is safe for simultaneous use; lines are
// written whole.
type EMF struct {
	Namespace string

	mu sync.Mutex
	w  io.Writer
}

// New writes EMF lines to w under namespace (DefaultNamespace if empty).
func New(w io.Writer, namespace string) *EMF {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &EMF{Namespace: namespace, w: w}
}

type metricDef struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// NoLatency, as a Decision's latency, records the request without a
// DecisionLatency: for decisions the store did not make.
const NoLatency time.Duration = -1

// Decision records one policy's decision of one request under a tier,
// and how long the store took to decide it (unless latency is NoLatency).
// The line's dimension sets are [Policy, Route, Decision], which the
// template's dashboard and alarms read, and [Policy, Tier, Decision].
func (e *EMF) Decision(at time.Time, policy, tier, route, decision string, latency time.Duration) {
	defs := []metricDef{{"Requests", "Count"}}
	line := map[string]any{
		"Policy":   policy,
		"Tier":     tier,
		"Route":    route,
		"Decision": decision,
		"Requests": 1,
	}
	if latency != NoLatency {
		defs = append(defs, metricDef{"DecisionLatency", "Milliseconds"})
		line["DecisionLatency"] = float64(latency.Microseconds()) / 1000
	}
	line["_aws"] = metadata{Timestamp: at.UnixMilli(), CloudWatchMetrics: []directive{{
		Namespace:  e.Namespace,
		Dimensions: [][]string{{"Policy", "Route", "Decision"}, {"Policy", "Tier", "Decision"}},
		Metrics:    defs,
	}}}
	e.write(line)
}

// StoreError records a request the store failed to decide, and the class
// of the failure.
func (e *EMF) StoreError(at time.Time, route, fault string) {
	e.write(map[string]any{
		"_aws": metadata{Timestamp: at.UnixMilli(), CloudWatchMetrics: []directive{{
			Namespace:  e.Namespace,
			Dimensions: [][]string{{"Route"}, {"Fault"}, {}},
			Metrics:    []metricDef{{"StoreErrors", "Count"}},
		}}},
		"Route":       route,
		"Fault":       fault,
		"StoreErrors": 1,
	})
}

func (e *EMF) write(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // the values above always marshal
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.w.Write(append(b, '\n'))
}
