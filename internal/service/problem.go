package service

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Problem types this API answers with. A type names the kind of problem
// for clients to switch on; the HTTP-level ones use about:blank, whose title
// is the status text (RFC 9457, section 4.2.1).
const (
	TypeRateLimited      = "urn:ratelimit:problem:rate-limit-exceeded"
	TypeStoreUnavailable = "urn:ratelimit:problem:store-unavailable"
	TypeInvalidKey       = "urn:ratelimit:problem:invalid-client-key"
	TypeInvalidQuery     = "urn:ratelimit:problem:invalid-query"
	TypeInvalidRequest   = "urn:ratelimit:problem:invalid-request"
	TypeUnauthenticated  = "urn:ratelimit:problem:unauthenticated"
	TypeBlank            = "about:blank"
)

// Problem is an RFC 9457 Problem Details object.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Policies names the policies that rejected a request (a 429's
	// extension member).
	Policies []deniedPolicy `json:"policies,omitempty"`
	// header holds response headers that belong to the problem, such as
	// Retry-After or Allow.
	header http.Header
}

// Error makes a Problem an error, so handlers can return it.
func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// sendable reports whether p can be sent as an answer: its status is an
// error's. Any other (a key function's, left zero) is the bug of whoever
// made it: sent as it is, it would be a success that never happened, or
// no response at all; writeError answers 500 instead.
func (p *Problem) sendable() bool { return p.Status >= 400 && p.Status <= 599 }

// methodNotAllowed is the 405 answer for path, which takes only the
// methods allow lists (the Allow header's value).
func methodNotAllowed(path, allow string) *Problem {
	p := problem(http.StatusMethodNotAllowed, TypeBlank, path+" accepts "+allow+" only.")
	p.header.Set("Allow", allow)
	return p
}

// Unauthenticated is the 401 answer, with WWW-Authenticate: Bearer, for a
// KeyFunc that finds no signed-in caller: its detail is sent as it is.
func Unauthenticated(detail string) *Problem {
	p := problem(http.StatusUnauthorized, TypeUnauthenticated, detail)
	p.header.Set("WWW-Authenticate", "Bearer")
	return p
}

// BadRequest is the 400 invalid-request answer, for a KeyFunc or CostFunc
// that finds the request malformed: its detail is sent as it is.
func BadRequest(detail string) *Problem {
	return problem(http.StatusBadRequest, TypeInvalidRequest, detail)
}

func problem(status int, typ, detail string) *Problem {
	return &Problem{Type: typ, Title: Title(status), Status: status, Detail: detail, header: http.Header{}}
}

// Title is a problem's title for status: its reason phrase as RFC 9110
// names it, which for 413 is not Go's (net/http keeps RFC 7231's "Request
// Entity Too Large").
func Title(status int) string {
	if status == http.StatusRequestEntityTooLarge {
		return "Content Too Large"
	}
	return http.StatusText(status)
}

// deniedPolicy is one policy in a 429's "policies" member.
type deniedPolicy struct {
	Name          string `json:"name"`
	Limit         int64  `json:"limit"`
	WindowSeconds int64  `json:"window_seconds"`
	Algorithm     string `json:"algorithm"`
	RetryAfter    int64  `json:"retry_after"`
	// Denied is false for a policy that allowed this request but has
	// nothing left, and so holds the next one back as long.
	Denied bool `json:"denied"`
	// Tier is the tier in force, for a policy with tiers: its name, or
	// "default" for the policy's own limit.
	Tier string `json:"tier,omitempty"`
}

// rateLimited is the 429 answer to a denied outcome: the design note's
// message for each policy that rejected the request, and in "policies"
// those policies and the enforced ones that allowed it with nothing left,
// each with its wait (and, for a policy with tiers, the tier in force,
// whose limit it is). Retry-After is the longest of those waits: the
// moment the next attempt passes every policy.
func rateLimited(o limiter.Outcome) *Problem {
	var details, usedUp []string // denials first
	var policies []deniedPolicy
	for _, d := range o.HoldingBack() {
		requests := " requests"
		if d.Policy.Limit == 1 {
			requests = " request"
		}
		limit := strconv.FormatInt(d.Policy.Limit, 10) + requests + " per " + strconv.FormatInt(decide.WindowSeconds(d.Policy), 10) + "s"
		if tier := tierLabel(d.Usage); tier != "" {
			limit += " (tier " + tier + ")"
		}
		switch {
		case d.Allowed && d.Remaining > 0:
			usedUp = append(usedUp, "The limit of "+limit+" for key '"+d.Key+"' has "+strconv.FormatInt(d.Remaining, 10)+" left, less than the request's cost, "+strconv.FormatInt(d.Cost, 10)+".")
		case d.Allowed:
			usedUp = append(usedUp, "The limit of "+limit+" for key '"+d.Key+"' is used up too.")
		default:
			details = append(details, "Rate limit of "+limit+" exceeded for key '"+d.Key+"'.")
		}
		policies = append(policies, deniedPolicy{
			Name: d.Policy.Name, Limit: d.Policy.Limit, WindowSeconds: decide.WindowSeconds(d.Policy),
			Algorithm: d.Policy.Algorithm.String(), RetryAfter: int64(d.ResetAfter / time.Second), Denied: !d.Allowed,
			Tier: tierLabel(d.Usage),
		})
	}
	p := problem(http.StatusTooManyRequests, TypeRateLimited, strings.Join(append(details, usedUp...), " "))
	p.Policies = policies
	// At least a second, even if a store denied without saying which
	// policy did: "0" would invite an immediate retry.
	p.header.Set("Retry-After", seconds(max(o.RetryAfter(), time.Second)))
	return p
}

// StoreRetryAfter is the Retry-After of a 503 when the store fails, capped at
// the window length: long enough for a held lock or a remount to clear,
// short enough that clients do not give up on a brief fault.
const StoreRetryAfter = 5 * time.Second

func storeUnavailable(window time.Duration) *Problem {
	p := problem(http.StatusServiceUnavailable, TypeStoreUnavailable,
		"The rate limit store is unavailable; try again later.")
	p.header.Set("Retry-After", seconds(min(StoreRetryAfter, window)))
	return p
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// writeError answers a request with the problem err describes. It is the one
// place where errors become responses: a *Problem is written as is, and
// anything else, which only a bug can produce, becomes a 500 whose detail
// says nothing about internals.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var p *Problem
	if !errors.As(err, &p) || !p.sendable() {
		p = problem(http.StatusInternalServerError, TypeBlank, "The server could not handle the request.")
	}
	out := *p
	out.Instance = instance(r)
	for k, v := range p.header {
		w.Header()[k] = v
	}
	writeJSON(w, "application/problem+json", out.Status, out)
}

// instance is a problem's instance for r: its path as the request wrote
// it, escaped, so that it is a URI reference naming what was asked for
// (decoded, /a%2Fb would read as /a/b and /a%3Fb as a query), and for an
// authority-form CONNECT, which has no path, its authority as a
// network-path reference. Over 200 bytes it is cut between escapes and
// ends in an escaped ellipsis, a URI reference still.
func instance(r *http.Request) string {
	s, cut := requestPath(r)
	if cut {
		s += "%E2%80%A6" // "…", escaped
	}
	return s
}

// requestPath is r's path as instance names it, at most 200 bytes, cut
// between escapes, and whether it was cut.
func requestPath(r *http.Request) (path string, cut bool) {
	s := r.URL.EscapedPath()
	if s == "" && r.URL.Host != "" {
		s = "//" + r.URL.Host
	}
	const most = 200
	if len(s) <= most {
		return s, false
	}
	n := most
	if s[n-1] == '%' {
		n--
	} else if s[n-2] == '%' {
		n -= 2
	}
	return s[:n], true
}

// writeJSON writes v as the response body. The body types here cannot fail
// to encode, so an error is only possible on a broken connection, where
// nothing can be done about it.
func writeJSON(w http.ResponseWriter, contentType string, status int, v any) {
	var body []byte
	var err error
	appended := false
	if a, ok := v.(jsonAppender); ok {
		body, appended = a.appendJSON(make([]byte, 0, 256))
	}
	if !appended {
		body, err = json.Marshal(v)
	}
	if err != nil {
		contentType, status = "application/problem+json", http.StatusInternalServerError
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
	}
	h := w.Header()
	// As h.Set, the names being canonical already.
	h["Content-Type"] = []string{contentType}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
