package main

import (
	"math"
	"time"
)

// hist is a log-linear latency histogram: bucket i holds durations whose
// logarithm base histBase falls in [i, i+1), so percentiles are exact to
// about 1%. Histograms from several processes merge by adding buckets.
type hist struct {
	Buckets map[int]int64 `json:"buckets"`
	Count   int64         `json:"count"`
	Max     time.Duration `json:"max"`
}

const histBase = 1.01

func newHist() *hist { return &hist{Buckets: map[int]int64{}} }

func (h *hist) add(d time.Duration) {
	if d < 1 {
		d = 1
	}
	h.Buckets[int(math.Log(float64(d))/math.Log(histBase))]++
	h.Count++
	h.Max = max(h.Max, d)
}

func (h *hist) merge(o *hist) {
	for b, n := range o.Buckets {
		h.Buckets[b] += n
	}
	h.Count += o.Count
	h.Max = max(h.Max, o.Max)
}

// quantile returns the duration below which a fraction q of samples fall,
// as the upper edge of its bucket.
func (h *hist) quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	lo, hi := math.MaxInt, math.MinInt
	for b := range h.Buckets {
		lo, hi = min(lo, b), max(hi, b)
	}
	want := int64(math.Ceil(q * float64(h.Count)))
	var seen int64
	for b := lo; b <= hi; b++ {
		seen += h.Buckets[b]
		if seen >= want {
			return min(time.Duration(math.Pow(histBase, float64(b+1))), h.Max)
		}
	}
	return h.Max
}
