package dynamotest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Proxy stands between a store and moto and plays the network's and
// DynamoDB's part that moto does not: it can let a call reach moto and
// then lose its answer (a connection reset after DynamoDB applied the
// write), and it applies a TransactWriteItems whose ClientRequestToken it
// has seen succeed once, as DynamoDB does, answering a repeat with the
// first answer instead of applying it again. (moto ignores the token, so
// against moto alone every repeat would apply twice.) What only DynamoDB
// can show is that it honours tokens as documented; what this shows is
// that the store sends every write so that it can.
type Proxy struct {
	URL string

	moto string
	mu   sync.Mutex
	// lose counts, by operation, the calls whose answer to lose next.
	lose map[string]int
	// inProgress counts, by operation, the repeats of a known token to
	// answer with TransactionInProgressException, as DynamoDB does while
	// the first call is still running.
	inProgress map[string]int
	// throttle counts, by operation, the repeats of a known token to
	// answer with ThrottlingException: the call was applied, its answer
	// lost, and the repeat refused for throughput.
	throttle map[string]int
	// fail counts, by operation, the calls to answer with a 500 without
	// forwarding them (never applied), after passing skip[op] on.
	fail map[string]int
	skip map[string]int
	done map[string]seen // token -> the first successful answer
	// running holds the tokens of calls passed on to moto and not yet
	// answered: a repeat meanwhile is told TransactionInProgressException,
	// as DynamoDB tells it, rather than applied a second time.
	running map[string]bool
	calls   []Call
	// before holds, by operation, what to run before passing the next
	// call of it on (a write that races in between a read and a write).
	before map[string]func()
	// stripItems drops the items from a cancelled transaction's reasons,
	// as an implementation that does not fill them would answer.
	stripItems bool
	// quiet keeps no Calls: the front of every moto (Start), which sees
	// every call of a test binary's run.
	quiet bool
}

// Call is one request the proxy saw.
type Call struct {
	Op    string // e.g. TransactWriteItems
	Token string // ClientRequestToken, for TransactWriteItems
	// Lost is set when the call reached moto and its answer was lost;
	// Repeat when the proxy answered from a token it had seen succeed.
	Lost, Repeat, InProgress, Failed, Throttled bool
}

type seen struct {
	body, answer []byte
}

// NewProxy starts a proxy to the moto at endpoint, stopped when tb ends.
func NewProxy(tb testing.TB, endpoint string) *Proxy {
	p, srv := newProxy(endpoint)
	tb.Cleanup(srv.Close)
	return p
}

// newProxy starts a proxy to the moto at endpoint; closing srv stops it.
func newProxy(endpoint string) (p *Proxy, srv *httptest.Server) {
	p = &Proxy{moto: endpoint, lose: map[string]int{}, inProgress: map[string]int{}, throttle: map[string]int{}, fail: map[string]int{}, skip: map[string]int{}, done: map[string]seen{}, running: map[string]bool{}, before: map[string]func(){}}
	srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = srv.URL
	return p, srv
}

// Lose makes the proxy lose the answers of the next n calls of op.
func (p *Proxy) Lose(op string, n int) { p.set(p.lose, op, n) }

// InProgress makes the proxy answer the next n repeats of a succeeded
// token of op with TransactionInProgressException.
func (p *Proxy) InProgress(op string, n int) { p.set(p.inProgress, op, n) }

// ThrottleRepeats makes the proxy answer the next n repeats of a
// succeeded token of op with ThrottlingException, as DynamoDB throttles
// any request past a partition's throughput, a repeat included.
func (p *Proxy) ThrottleRepeats(op string, n int) { p.set(p.throttle, op, n) }

// Fail makes the proxy pass the next skip calls of op on, then answer n
// with a 500 without passing them on.
func (p *Proxy) Fail(op string, skip, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.skip[op], p.fail[op] = skip, n
}

// Before makes the proxy run f before it passes the next call of op on to
// moto, once: f may write to moto directly, as another process would
// between a store's read and its write.
func (p *Proxy) Before(op string, f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before[op] = f
}

// StripItems makes the proxy drop the Item of every reason of a cancelled
// transaction (moto fills it when asked, with
// ReturnValuesOnConditionCheckFailure ALL_OLD, as DynamoDB documents), to
// show what a store does without them.
func (p *Proxy) StripItems(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stripItems = on
}

func (p *Proxy) set(m map[string]int, op string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m[op] = n
}

// Calls are the requests the proxy saw, in order.
func (p *Proxy) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

func (p *Proxy) take(m map[string]int, op string) bool {
	if m[op] > 0 {
		m[op]--
		return true
	}
	return false
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndex(op, ".")+1:]
	var in struct{ ClientRequestToken string }
	json.Unmarshal(body, &in)
	c := p.classify(op, in.ClientRequestToken)
	switch {
	case c.Failed:
		answer(w, http.StatusInternalServerError, "InternalServerError", "injected")
		return
	case c.InProgress:
		answer(w, http.StatusBadRequest, "TransactionInProgressException", "injected")
		return
	case c.Throttled:
		answer(w, http.StatusBadRequest, "ThrottlingException", "injected")
		return
	case c.Repeat:
		p.mu.Lock()
		prev := p.done[c.Token]
		p.mu.Unlock()
		switch {
		case !bytes.Equal(canonical(prev.body), canonical(body)):
			answer(w, http.StatusBadRequest, "IdempotentParameterMismatchException", "same token, another request")
		case c.Lost:
			drop(w)
		default:
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Write(prev.answer)
		}
		return
	}
	p.mu.Lock()
	before, strip := p.before[op], p.stripItems
	delete(p.before, op)
	p.mu.Unlock()
	if before != nil {
		before()
	}
	status, header, reply := p.forward(r, body)
	if strip {
		reply = withoutItems(reply)
		header.Del("X-Amz-Crc32") // the checksum of the answer as moto wrote it
	}
	if c.Token != "" {
		p.mu.Lock()
		if status == http.StatusOK {
			p.done[c.Token] = seen{body: body, answer: reply}
		}
		delete(p.running, c.Token)
		p.mu.Unlock()
	}
	if c.Lost {
		drop(w)
		return
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	w.Write(reply)
}

// classify decides what becomes of a call and records it.
func (p *Proxy) classify(op, token string) Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Call{Op: op, Token: token}
	_, known := p.done[token]
	known = known && token != ""
	switch {
	case p.fail[op] > 0 && !p.take(p.skip, op) && p.take(p.fail, op):
		c.Failed = true
	case token != "" && p.running[token]:
		c.InProgress = true
	case known && p.take(p.inProgress, op):
		c.InProgress = true
	case known && p.take(p.throttle, op):
		c.Throttled = true
	default:
		c.Repeat = known
		c.Lost = p.take(p.lose, op)
		if !known && token != "" {
			p.running[token] = true // passed on to moto: see serve
		}
	}
	if !p.quiet {
		p.calls = append(p.calls, c)
	}
	return c
}

// withoutItems is a cancelled transaction's answer without the items of
// its reasons; any other answer as it is.
func withoutItems(reply []byte) []byte {
	var v map[string]any
	if json.Unmarshal(reply, &v) != nil {
		return reply
	}
	reasons, ok := v["CancellationReasons"].([]any)
	if !ok {
		return reply
	}
	for _, r := range reasons {
		if m, ok := r.(map[string]any); ok {
			delete(m, "Item")
		}
	}
	b, _ := json.Marshal(v)
	return b
}

// canonical is a JSON body with its objects' members in one order: a
// request's parameters compare equal whatever order its maps were
// serialized in, as DynamoDB compares them.
func canonical(body []byte) []byte {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return body
	}
	b, _ := json.Marshal(v)
	return b
}

// answer writes a DynamoDB error.
func answer(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, typ, msg)
}

// forward passes the request on to moto and returns its answer.
func (p *Proxy) forward(r *http.Request, body []byte) (int, http.Header, []byte) {
	req, _ := http.NewRequest(r.Method, p.moto+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return http.StatusBadGateway, http.Header{}, []byte(err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	h := resp.Header.Clone()
	h.Del("Content-Length")
	return resp.StatusCode, h, answer
}

// drop closes the connection without an answer: what the client sees when
// the network loses one.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}
