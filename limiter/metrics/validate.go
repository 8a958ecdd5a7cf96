package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Validate checks one log line against the rules of the CloudWatch
// Embedded Metric Format specification that decide whether CloudWatch
// extracts metrics from it: the line is one JSON object; _aws is an object
// with a number Timestamp and a non-empty CloudWatchMetrics array; every
// directive has a Namespace (1–255 characters), Dimensions (an array of
// dimension sets of at most 30 keys each) and Metrics (1–100 objects with
// a Name and, if present, a string Unit); every dimension key is a string
// member of the root, and every metric name is a number (or an array of
// at most 100 numbers) at the root. Lines that fail are ingested as plain
// logs and silently produce no metric, so the tests run every line the
// handlers write through this.
func Validate(line []byte) error {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(line, &root); err != nil {
		return fmt.Errorf("not one JSON object: %w", err)
	}
	raw, ok := root["_aws"]
	if !ok {
		return errors.New("no _aws member")
	}
	var meta struct {
		Timestamp         json.RawMessage   `json:"Timestamp"`
		CloudWatchMetrics []json.RawMessage `json:"CloudWatchMetrics"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("_aws: %w", err)
	}
	if meta.Timestamp == nil {
		return errors.New("_aws.Timestamp missing")
	}
	var ms float64
	if err := json.Unmarshal(meta.Timestamp, &ms); err != nil {
		return fmt.Errorf("_aws.Timestamp %s is not a number", meta.Timestamp)
	}
	if len(meta.CloudWatchMetrics) == 0 {
		return errors.New("_aws.CloudWatchMetrics is empty")
	}
	for i, raw := range meta.CloudWatchMetrics {
		if err := validateDirective(root, raw); err != nil {
			return fmt.Errorf("CloudWatchMetrics[%d]: %w", i, err)
		}
	}
	return nil
}

// validateDirective checks one metric directive against the root it
// describes.
func validateDirective(root map[string]json.RawMessage, raw json.RawMessage) error {
	var d struct {
		Namespace  *string     `json:"Namespace"`
		Dimensions *[][]string `json:"Dimensions"`
		Metrics    []struct {
			Name *string         `json:"Name"`
			Unit json.RawMessage `json:"Unit"`
		} `json:"Metrics"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if d.Namespace == nil || len(*d.Namespace) == 0 || len(*d.Namespace) > 255 {
		return errors.New("Namespace missing or not 1-255 characters")
	}
	if d.Dimensions == nil {
		return errors.New("Dimensions missing")
	}
	for _, set := range *d.Dimensions {
		if err := validateDimensions(root, set); err != nil {
			return err
		}
	}
	if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
		return fmt.Errorf("Metrics has %d entries, not 1-100", len(d.Metrics))
	}
	for _, m := range d.Metrics {
		if m.Name == nil || *m.Name == "" {
			return errors.New("a metric has no Name")
		}
		if m.Unit != nil {
			var unit string
			if err := json.Unmarshal(m.Unit, &unit); err != nil || !validUnit[unit] {
				return fmt.Errorf("metric %q: unit %s is not a CloudWatch unit", *m.Name, m.Unit)
			}
		}
		if err := metricValue(root[*m.Name]); err != nil {
			return fmt.Errorf("metric %q: %w", *m.Name, err)
		}
	}
	return nil
}

// validateDimensions checks a dimension set: at most 30 keys, each a
// string member of the root.
func validateDimensions(root map[string]json.RawMessage, set []string) error {
	if len(set) > 30 {
		return fmt.Errorf("a dimension set has %d keys, more than 30", len(set))
	}
	for _, k := range set {
		var v any
		if err := json.Unmarshal(root[k], &v); err != nil {
			return fmt.Errorf("dimension %q is not a member of the root", k)
		}
		if _, ok := v.(string); !ok {
			return fmt.Errorf("dimension %q is %T, not a string", k, v)
		}
	}
	return nil
}

func metricValue(raw json.RawMessage) error {
	if raw == nil {
		return errors.New("no value at the root")
	}
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return nil
	}
	var ns []float64
	if json.Unmarshal(raw, &ns) == nil && len(ns) <= 100 {
		return nil
	}
	return fmt.Errorf("value %s is not a number or an array of at most 100 numbers", raw)
}

// validUnit is CloudWatch's StandardUnit enumeration.
var validUnit = map[string]bool{}

func init() {
	for _, u := range []string{
		"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes",
		"Gigabytes", "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits",
		"Percent", "Count", "Bytes/Second", "Kilobytes/Second", "Megabytes/Second",
		"Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second",
		"Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
	} {
		validUnit[u] = true
	}
}
