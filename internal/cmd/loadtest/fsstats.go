package main

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// fsCounts is what latencyfs's /stats serves (tools/cmd/latencyfs): the
// file-system calls that reached it, by kind, and how many of them were
// read-class and write-class round trips.
type fsCounts struct {
	Ops        map[string]int64 `json:"ops"`
	ReadClass  int64            `json:"read_class"`
	WriteClass int64            `json:"write_class"`
}

// fsCounters reads latencyfs's counters at base; with reset, it zeros
// them too (POST /reset), returning what they were.
func fsCounters(base string, reset bool) (fsCounts, error) {
	var resp *http.Response
	var err error
	if reset {
		resp, err = http.Post(base+"/reset", "", nil)
	} else {
		resp, err = http.Get(base + "/stats")
	}
	if err != nil {
		return fsCounts{}, fmt.Errorf("latencyfs counters: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fsCounts{}, fmt.Errorf("latencyfs counters: %s", resp.Status)
	}
	var c fsCounts
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return fsCounts{}, fmt.Errorf("latencyfs counters: %w", err)
	}
	return c, nil
}
