package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// latency is the model: how long each kind of request takes before moto
// sees it.
type latency struct {
	read, write, transact time.Duration
}

// of is the delay of one request of op.
func (l latency) of(op string) time.Duration {
	switch op {
	case "GetItem", "BatchGetItem", "Query", "Scan":
		return l.read
	case "TransactWriteItems":
		return l.transact
	}
	return l.write
}

// proxy stands between a store and moto: it delays every request by the
// latency model, passes it on, and counts requests by operation and the
// capacity units DynamoDB on demand would bill for them (see units).
type proxy struct {
	moto  string
	delay latency

	mu     sync.Mutex
	counts counts
}

// counts are what a proxy saw.
type counts struct {
	Requests  map[string]int64 `json:"requests"` // by operation
	RRU       float64          `json:"rru"`      // read request units
	WRU       float64          `json:"wru"`      // write request units
	Cancelled int64            `json:"cancelled"`
	// Moto is the time moto took to answer, queueing included: what the
	// emulator adds to the model.
	Moto time.Duration `json:"moto"`
}

func newProxy(moto string, delay latency) *proxy {
	return &proxy{moto: moto, delay: delay, counts: counts{Requests: map[string]int64{}}}
}

func (p *proxy) snapshot() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	c.Requests = map[string]int64{}
	for k, v := range p.counts.Requests {
		c.Requests[k] = v
	}
	return c
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndex(op, ".")+1:]
	time.Sleep(p.delay.of(op))
	req, _ := http.NewRequest(r.Method, p.moto+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	began := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	took := time.Since(began)
	rru, wru := units(op, body)
	p.mu.Lock()
	p.counts.Requests[op]++
	p.counts.RRU += rru
	p.counts.WRU += wru
	p.counts.Moto += took
	if bytes.Contains(reply, []byte("TransactionCanceledException")) {
		p.counts.Cancelled++
	}
	p.mu.Unlock()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	w.Write(reply)
}

// units are the read and write request units DynamoDB on demand bills for
// one request, every item here being under 1 KB (the audit record, the
// largest, is about 300 bytes): a strongly consistent read of an item 1,
// of one that does not exist the same; BatchGetItem as a GetItem per key;
// a transactional write 2 per item, also when the transaction is cancelled
// (assumed: the worse case); a single-item write 1, also when its
// condition fails.
func units(op string, body []byte) (rru, wru float64) {
	switch op {
	case "GetItem":
		return 1, 0
	case "BatchGetItem":
		var in struct {
			RequestItems map[string]struct{ Keys []json.RawMessage }
		}
		json.Unmarshal(body, &in)
		for _, t := range in.RequestItems {
			rru += float64(len(t.Keys))
		}
		return rru, 0
	case "TransactWriteItems":
		var in struct{ TransactItems []json.RawMessage }
		json.Unmarshal(body, &in)
		return 0, 2 * float64(len(in.TransactItems))
	case "UpdateItem", "PutItem", "DeleteItem":
		return 0, 1
	}
	return 0, 0
}
