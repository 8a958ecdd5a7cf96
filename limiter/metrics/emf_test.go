package metrics_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter/metrics"
)

var at = time.Date(2026, 11, 30, 12, 0, 5, 250_000_000, time.UTC)

func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(b)
	for sc.Scan() {
		if err := metrics.Validate(sc.Bytes()); err != nil {
			t.Fatalf("line fails the EMF specification: %v\n%s", err, sc.Bytes())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestDecisionLineIsEMF(t *testing.T) {
	var b bytes.Buffer
	e := metrics.New(&b, "RateLimit/prod")
	e.Decision(at, "burst", "pro", "GET /ping", metrics.ShadowRejected, 1500*time.Microsecond)

	got := lines(t, &b)
	if len(got) != 1 {
		t.Fatalf("%d lines, want 1", len(got))
	}
	m := got[0]
	aws := m["_aws"].(map[string]any)
	if ts := aws["Timestamp"].(float64); int64(ts) != at.UnixMilli() {
		t.Errorf("Timestamp = %v, want %d (the decision's time, in ms)", ts, at.UnixMilli())
	}
	dir := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if dir["Namespace"] != "RateLimit/prod" {
		t.Errorf("Namespace = %v", dir["Namespace"])
	}
	// The first set is what the template's dashboard and alarms read; the
	// second, each tier's.
	if d, _ := json.Marshal(dir["Dimensions"]); string(d) != `[["Policy","Route","Decision"],["Policy","Tier","Decision"]]` {
		t.Errorf("Dimensions = %s", d)
	}
	for k, want := range map[string]any{
		"Policy": "burst", "Tier": "pro", "Route": "GET /ping", "Decision": "shadow_rejected",
		"Requests": 1.0, "DecisionLatency": 1.5,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
}

func TestStoreErrorLineIsEMFWithARouteAndAnOverallSeries(t *testing.T) {
	var b bytes.Buffer
	metrics.New(&b, "").StoreError(at, "GET /ping", "corrupt")
	m := lines(t, &b)[0]
	dir := m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if dir["Namespace"] != metrics.DefaultNamespace {
		t.Errorf("Namespace = %v, want the default %q", dir["Namespace"], metrics.DefaultNamespace)
	}
	// The empty set is the series the template's alarm watches: one alarm
	// for every route; Fault is the series of the persistent faults' alarm.
	if d, _ := json.Marshal(dir["Dimensions"]); string(d) != `[["Route"],["Fault"],[]]` {
		t.Errorf("Dimensions = %s", d)
	}
	if m["StoreErrors"] != 1.0 || m["Route"] != "GET /ping" || m["Fault"] != "corrupt" {
		t.Errorf("StoreErrors = %v, Route = %v, Fault = %v", m["StoreErrors"], m["Route"], m["Fault"])
	}
}

// Lines come out whole when many requests finish at once: a torn line is
// a lost metric.
func TestLinesStayWholeUnderConcurrency(t *testing.T) {
	var b bytes.Buffer
	e := metrics.New(&b, "")
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if i%2 == 0 {
					e.Decision(at, "ping", "default", "GET /ping", metrics.Allowed, time.Millisecond)
				} else {
					e.StoreError(at, "GET /ping", "busy")
				}
			}
		}()
	}
	wg.Wait()
	if n := len(lines(t, &b)); n != 1000 {
		t.Fatalf("%d valid lines, want 1000", n)
	}
}

// The validator has to be able to say no, or the tests above prove nothing.
func TestValidateRejectsWhatCloudWatchWouldIgnore(t *testing.T) {
	const good = `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["P"]],"Metrics":[{"Name":"M","Unit":"Count"}]}]},"P":"x","M":1}`
	if err := metrics.Validate([]byte(good)); err != nil {
		t.Fatalf("valid line rejected: %v", err)
	}
	bad := map[string]string{
		"not JSON":              `_aws`,
		"no _aws":               `{"M":1}`,
		"no Timestamp":          strings.Replace(good, `"Timestamp":1,`, ``, 1),
		"string Timestamp":      strings.Replace(good, `"Timestamp":1`, `"Timestamp":"1"`, 1),
		"no directives":         `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]}}`,
		"no Namespace":          strings.Replace(good, `"Namespace":"N",`, ``, 1),
		"no Dimensions":         strings.Replace(good, `"Dimensions":[["P"]],`, ``, 1),
		"dimension not at root": strings.Replace(good, `"P":"x",`, ``, 1),
		"numeric dimension":     strings.Replace(good, `"P":"x"`, `"P":3`, 1),
		"no metrics":            strings.Replace(good, `{"Name":"M","Unit":"Count"}`, ``, 1),
		"unknown unit":          strings.Replace(good, `"Count"`, `"Requests"`, 1),
		"metric not at root":    strings.Replace(good, `,"M":1`, ``, 1),
		"string metric value":   strings.Replace(good, `"M":1`, `"M":"1"`, 1),
		"31 dimensions":         strings.Replace(good, `[["P"]]`, `[[`+strings.Repeat(`"P",`, 30)+`"P"]]`, 1),
	}
	for name, line := range bad {
		if err := metrics.Validate([]byte(line)); err == nil {
			t.Errorf("%s: accepted %s", name, line)
		}
	}
}

// A decision the store did not make (a RejectCache denial) is counted but
// has no latency to pull the figures toward zero.
func TestDecisionWithoutLatency(t *testing.T) {
	var b bytes.Buffer
	metrics.New(&b, "").Decision(at, "ping", "default", "GET /ping", metrics.Rejected, metrics.NoLatency)
	m := lines(t, &b)[0]
	if _, ok := m["DecisionLatency"]; ok || m["Requests"] != 1.0 {
		t.Errorf("line %v, want Requests and no DecisionLatency", m)
	}
	names, _ := json.Marshal(m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"])
	if string(names) != `[{"Name":"Requests","Unit":"Count"}]` {
		t.Errorf("Metrics = %s, want Requests alone", names)
	}
}
