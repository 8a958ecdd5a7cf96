package service

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/ft251/ratelimit/limiter"
)

// ClientKeyHeader is the header the "header" key source reads.
const ClientKeyHeader = "X-Client-Key"

// FallbackKey is the key of requests without X-Client-Key under the
// "header" source, as in the design note: they all share one counter.
const FallbackKey = "127.0.0.1"

// Caller is what the platform in front of the handler knows about a request.
// The local server knows only the connection; behind API Gateway the Lambda
// adapter fills in the rest from the event (limiter/awslambda).
type Caller struct {
	// SourceIP is the client's address as the platform saw it: API
	// Gateway's requestContext.http.sourceIp, or the TCP peer locally.
	// Never X-Forwarded-For, which any client can write.
	SourceIP string
	// Claims are the JWT authorizer's claims, if any.
	Claims map[string]string
	// RequestID identifies the request to the platform (API Gateway's
	// requestContext.requestId); it is what the audit row records.
	RequestID string
	// LambdaRequestID is the invocation's id, for logs.
	LambdaRequestID string
	// Principal is who signed the request, when the platform checked a
	// signature: the IAM principal's ARN behind API Gateway's IAM
	// authorization. The admin routes log it.
	Principal string
	// Headers, when not nil, are the request headers exactly as the client
	// sent them, names in lower case. API Gateway passes duplicate headers
	// joined with commas, and the proxy then splits every header value on
	// commas; reading the raw value keeps a key with a comma one key.
	Headers map[string]string
}

type callerKey struct{}

// WithCaller returns ctx carrying how to tell what the platform knows about
// a request: a platform adapter (awslambda.HTTP) sets it on every request it
// hands on, so that an API or a Middleware behind it needs no
// Options.Caller to key on the source address API Gateway saw.
func WithCaller(ctx context.Context, caller func(*http.Request) Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// callerOf is what the platform knows about r: Options.Caller's answer,
// else the adapter's in front (WithCaller), else the TCP connection's.
func (e *engine) callerOf(r *http.Request) Caller {
	if e.opts.Caller != nil {
		return e.opts.Caller(r)
	}
	if caller, ok := r.Context().Value(callerKey{}).(func(*http.Request) Caller); ok {
		return caller(r)
	}
	return localCaller(r)
}

// platformCaller is what the platform in front says about r (WithCaller),
// else what the TCP connection tells.
func platformCaller(r *http.Request) Caller {
	if caller, ok := r.Context().Value(callerKey{}).(func(*http.Request) Caller); ok {
		return caller(r)
	}
	return localCaller(r)
}

// KeyOf is r's client key by src, as the platform in front tells it
// (WithCaller), or the TCP connection: what httpapi's key helpers find.
func KeyOf(r *http.Request, src limiter.KeySource) (string, error) {
	return clientKey(r, platformCaller(r), src)
}

// HeaderKey is r's client key from the header name: its raw value when the
// platform kept it, spaces and tabs around it trimmed; a 400 when the
// request has none, or one that is not a valid key.
func HeaderKey(r *http.Request, name string) (string, error) {
	key := strings.Trim(platformCaller(r).header(r, name), " \t")
	if key == "" {
		return "", problem(http.StatusBadRequest, TypeInvalidKey, "The request carries no "+name+" header to limit by.")
	}
	if err := limiter.ValidKey(key); err != nil {
		return "", refusal(err)
	}
	return key, nil
}

// localCaller is the Caller of a request served directly over TCP.
func localCaller(r *http.Request) Caller {
	ip := r.RemoteAddr
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	return Caller{SourceIP: ip}
}

// header returns the named request header as one string: the raw value when
// the platform kept it, else every value joined with commas, which is what
// API Gateway does with duplicates.
func (c Caller) header(r *http.Request, name string) string {
	if c.Headers != nil {
		return c.Headers[strings.ToLower(name)]
	}
	return strings.Join(r.Header.Values(name), ",")
}

// clientKey finds the request's client key according to src and validates it.
func clientKey(r *http.Request, c Caller, src limiter.KeySource) (string, error) {
	var key string
	switch src.Kind {
	case limiter.KeyFromSourceIP:
		key = c.SourceIP
		if key == "" {
			return "", problem(http.StatusBadRequest, TypeInvalidKey, "The request carries no source IP to limit by.")
		}
	case limiter.KeyFromClaim:
		key = c.Claims[src.Claim]
		if key == "" {
			return "", Unauthenticated("The request carries no '" + src.Claim + "' claim from an authorizer.")
		}
	default:
		// net/http trims the spaces and tabs around a header value and API
		// Gateway's raw value keeps them: trim here so both agree.
		key = strings.Trim(c.header(r, ClientKeyHeader), " \t")
		if key == "" {
			key = FallbackKey
		}
	}
	if err := limiter.ValidKey(key); err != nil {
		return "", refusal(err)
	}
	return key, nil
}
