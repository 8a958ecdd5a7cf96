package functions_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// emfLines returns what the functions write for one decision and one store
// error, parsed: the dashboard and alarm must ask for exactly these.
func emfLines(t *testing.T, namespace string) (decision, storeErr map[string]any) {
	var b bytes.Buffer
	e := metrics.New(&b, namespace)
	e.Decision(time.Now(), "ping", "default", "GET /ping", metrics.Allowed, time.Millisecond)
	e.StoreError(time.Now(), "GET /ping", "corrupt")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	json.Unmarshal([]byte(lines[0]), &decision)
	json.Unmarshal([]byte(lines[1]), &storeErr)
	return decision, storeErr
}

func directive(line map[string]any) (dims [][]string, names []string) {
	d := at(line, "_aws", "CloudWatchMetrics", 0)
	for _, set := range at(d, "Dimensions").([]any) {
		var keys []string
		for _, k := range set.([]any) {
			keys = append(keys, k.(string))
		}
		slices.Sort(keys)
		dims = append(dims, keys)
	}
	for _, m := range at(d, "Metrics").([]any) {
		names = append(names, at(m, "Name").(string))
	}
	return dims, names
}

// TestDashboardAndAlarmReadTheMetricsTheFunctionsWrite resolves the
// template's dashboard body and alarm as CloudFormation would, and checks
// them against the EMF lines the code writes: a renamed metric or
// dimension would otherwise leave a dashboard of empty graphs and an alarm
// that never fires, and nothing would say so.
func TestDashboardAndAlarmReadTheMetricsTheFunctionsWrite(t *testing.T) {
	t.Parallel()
	res, _ := expandTemplate(t)
	const stack, region = "rl-test", "eu-west-1"
	namespace := "RateLimit/" + stack

	// Every function writes under the stack's namespace.
	for _, fn := range []string{"PingFunction", "StatusFunction", "PruneFunction"} {
		ns := at(res, fn, "Properties", "Environment", "Variables", "METRICS_NAMESPACE", "Fn::Sub")
		if ns != "RateLimit/${AWS::StackName}" {
			t.Errorf("%s METRICS_NAMESPACE = %v", fn, ns)
		}
		for _, env := range []string{"POLICIES", "SHADOW"} {
			if at(res, fn, "Properties", "Environment", "Variables", env) == nil {
				t.Errorf("%s has no %s", fn, env)
			}
		}
	}
	decision, storeErr := emfLines(t, namespace)
	decDims, decNames := directive(decision)
	errDims, errNames := directive(storeErr)

	// The dashboard body, substituted.
	sub := at(res, "Dashboard", "Properties", "DashboardBody", "Fn::Sub").([]any)
	vars := map[string]string{"AWS::Region": region, "StoreErrorsAlarm.Arn": "arn:aws:cloudwatch:" + region + ":123456789012:alarm:x",
		"StoreFaultsAlarm.Arn": "arn:aws:cloudwatch:" + region + ":123456789012:alarm:y"}
	for k, v := range sub[1].(map[string]any) {
		if v, ok := at(v, "Fn::Sub").(string); ok {
			vars[k] = strings.ReplaceAll(v, "${AWS::StackName}", stack)
		}
	}
	body := regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(sub[0].(string), func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			t.Errorf("dashboard refers to %s, which nothing defines", m)
		}
		return v
	})
	var dash struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Region  string  `json:"region"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &dash); err != nil {
		t.Fatalf("dashboard body is not JSON once substituted: %v\n%s", err, body)
	}
	if len(dash.Widgets) < 4 {
		t.Fatalf("%d widgets, want requests, rejections, latency and store errors", len(dash.Widgets))
	}
	// The namespace is quoted: a stack name may hold characters a bare
	// schema name may not.
	search := regexp.MustCompile(`^SEARCH\('\{"([^"]*)",([^}]*)\} MetricName="(\w+)"( .*)?', '(\w+)', 60\)$`)
	var graphed []string
	for _, w := range dash.Widgets {
		p := w.Properties
		if p.Region != region {
			t.Errorf("%q: region %q", p.Title, p.Region)
		}
		for _, m := range p.Metrics {
			if expr, ok := at(m[0], "expression").(string); ok {
				s := search.FindStringSubmatch(expr)
				if s == nil {
					t.Errorf("%q: %s is not a SEARCH of one metric", p.Title, expr)
					continue
				}
				dims := slices.Sorted(slices.Values(strings.Split(s[2], ",")))
				lineDims, lineNames := decDims, decNames
				if slices.Contains(errNames, s[3]) {
					lineDims, lineNames = errDims, errNames
				}
				if s[1] != namespace || !slices.ContainsFunc(lineDims, func(d []string) bool { return slices.Equal(d, dims) }) || !slices.Contains(lineNames, s[3]) {
					t.Errorf("%q searches {%s,%s} %s; the functions write %s %v in %v", p.Title, s[1], s[2], s[3], namespace, lineNames, lineDims)
				}
				graphed = append(graphed, s[3]+" "+s[4])
				continue
			}
			// A plain metric: namespace, name, then dimension pairs.
			if len(m) < 2 {
				t.Errorf("%q graphs %v, not a metric", p.Title, m)
				continue
			}
			name, _ := m[1].(string)
			if m[0] != namespace || !slices.Contains(errNames, name) {
				t.Errorf("%q graphs %v; the functions write %s in %s", p.Title, m, errNames, namespace)
			}
			if !slices.ContainsFunc(errDims, func(d []string) bool { return len(d) == 0 }) {
				t.Errorf("%q graphs %v with no dimensions, which the functions do not write", p.Title, name)
			}
			graphed = append(graphed, name)
		}
	}
	for _, want := range []string{"Requests ", "DecisionLatency ", "StoreErrors"} {
		if !slices.ContainsFunc(graphed, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("no graph of %q (graphs: %q)", want, graphed)
		}
	}
	if !slices.ContainsFunc(graphed, func(g string) bool {
		return strings.Contains(g, `"`+metrics.Rejected+`"`) && strings.Contains(g, `"`+metrics.ShadowRejected+`"`)
	}) {
		t.Errorf("no graph of rejections and shadow rejections (graphs: %q)", graphed)
	}

	// The alarm watches the store errors of every route: the series with
	// no dimensions.
	a := at(res, "StoreErrorsAlarm", "Properties")
	if at(a, "Namespace", "Fn::Sub") != "RateLimit/${AWS::StackName}" || !slices.Contains(errNames, at(a, "MetricName").(string)) || at(a, "Dimensions") != nil {
		t.Errorf("alarm watches %v %v %v; the functions write %v without dimensions in the stack's namespace",
			at(a, "Namespace"), at(a, "MetricName"), at(a, "Dimensions"), errNames)
	}
	if at(a, "TreatMissingData") != "notBreaching" {
		t.Errorf("alarm TreatMissingData = %v: StoreErrors exists only while errors happen, so missing data is good news", at(a, "TreatMissingData"))
	}

	// The persistent faults' alarm adds up StoreErrors of exactly the
	// faults that do not clear by themselves, by the dimension the
	// functions write them under.
	if !slices.ContainsFunc(errDims, func(d []string) bool { return slices.Equal(d, []string{"Fault"}) }) {
		t.Fatalf("the functions write StoreErrors by %v, not by Fault", errDims)
	}
	var watched []string
	for _, m := range at(res, "StoreFaultsAlarm", "Properties", "Metrics").([]any) {
		stat := at(m, "MetricStat", "Metric")
		if stat == nil {
			continue
		}
		if at(stat, "Namespace", "Fn::Sub") != "RateLimit/${AWS::StackName}" || at(stat, "MetricName") != "StoreErrors" || at(stat, "Dimensions", 0, "Name") != "Fault" {
			t.Errorf("faults alarm watches %s", jsonOf(stat))
		}
		watched = append(watched, at(stat, "Dimensions", 0, "Value").(string))
	}
	var persistent []string
	for _, f := range []fault.Class{fault.Busy, fault.Unavailable, fault.Corrupt, fault.Schema, fault.JournalMode} {
		if !f.Transient() {
			persistent = append(persistent, string(f))
		}
	}
	slices.Sort(watched)
	slices.Sort(persistent)
	if !slices.Equal(watched, persistent) {
		t.Errorf("faults alarm watches %v, want the faults that do not clear by themselves, %v", watched, persistent)
	}
	if decision["Fault"] != nil || storeErr["Fault"] != string(fault.Corrupt) {
		t.Errorf("the store error line's Fault = %v", storeErr["Fault"])
	}
}
