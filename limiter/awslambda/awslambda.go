// Package awslambda runs an http.Handler on AWS Lambda behind API Gateway
// HTTP API events (payload format 2.0), through aws-lambda-go-api-proxy,
// and tells a limiter in that handler (httpapi.Limit, httpapi.Middleware)
// what API Gateway knows about each request: the source IP it saw, the
// JWT authorizer's claims, the IAM principal. Prune is the handler of a
// scheduled function that prunes a store.
package awslambda

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/ft251/ratelimit/internal/service"
)

// DeadlineMargin is how long before Lambda's deadline the handler's own
// ends: enough to roll back, write the 503 and return it.
const DeadlineMargin = 500 * time.Millisecond

// HTTPHandler is the Lambda handler of an HTTP API function.
type HTTPHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// HTTP adapts h to API Gateway HTTP API events. It hands each event to the
// proxy's ProxyWithContext, which puts API Gateway's request context and the
// Lambda context on the request's context, where Caller reads them. (The
// proxy's Proxy method carries them in a request header instead, which a
// client can forge.) The event's raw headers ride along too, because the
// proxy splits header values on commas, and so does what API Gateway
// knows of the request: a limiter in h keys on the source address API
// Gateway saw, and reads claims and the IAM principal, without being told.
//
// An event the proxy cannot turn into a request (a body that is not valid
// base64, say) is answered with a 400 problem rather than an invocation
// error, so API Gateway relays a clear answer instead of a bare 500.
func HTTP(h http.Handler) HTTPHandler {
	adapter := httpadapter.NewV2(h)
	return func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		// Lambda's deadline is when it ends the invocation; the handler's
		// comes DeadlineMargin sooner, so that a wait cut short by it still
		// leaves time to answer with the fail mode instead of a timeout.
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-DeadlineMargin))
			defer cancel()
		}
		ctx = context.WithValue(ctx, rawHeadersKey{}, lowerKeys(e.Headers))
		ctx = service.WithCaller(ctx, caller)
		resp, err := adapter.ProxyWithContext(ctx, e)
		if err != nil {
			slog.Warn("malformed event", "error", err.Error())
			return badEvent(e), nil
		}
		return resp, nil
	}
}

type rawHeadersKey struct{}

// lowerKeys indexes headers by lower-case name. API Gateway sends names in
// lower case already; a hand-made event may spell one name two ways, and
// then the values are joined with commas, in the order of the spellings, as
// API Gateway joins repeated headers, rather than one picked at random.
func lowerKeys(h map[string]string) map[string]string {
	names := slices.Sorted(maps.Keys(h))
	out := make(map[string]string, len(h))
	for _, k := range names {
		lk := strings.ToLower(k)
		if v, ok := out[lk]; ok {
			out[lk] = v + "," + h[k]
		} else {
			out[lk] = h[k]
		}
	}
	return out
}

// badEvent is the 400 problem for an event that is not an HTTP request.
func badEvent(e events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(service.Problem{
		Type:     service.TypeBlank,
		Title:    http.StatusText(http.StatusBadRequest),
		Status:   http.StatusBadRequest,
		Detail:   "The request could not be read.",
		Instance: e.RawPath,
	})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusBadRequest,
		Headers:    map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"},
		Body:       string(body),
	}
}

// caller is what API Gateway and Lambda know about r: the source IP, the
// request id, JWT claims, the IAM principal that signed it (with IAM
// authorization), the invocation id and the raw headers.
func caller(r *http.Request) service.Caller {
	ctx := r.Context()
	c := service.Caller{SourceIP: r.RemoteAddr}
	if gw, ok := core.GetAPIGatewayV2ContextFromContext(ctx); ok {
		// sam local generate-event writes the source IP as a CIDR
		// (192.168.0.1/32); API Gateway writes the bare address.
		c.SourceIP, _, _ = strings.Cut(gw.HTTP.SourceIP, "/")
		c.RequestID = gw.RequestID
		if gw.Authorizer != nil && gw.Authorizer.JWT != nil {
			c.Claims = gw.Authorizer.JWT.Claims
		}
		if gw.Authorizer != nil && gw.Authorizer.IAM != nil {
			c.Principal = gw.Authorizer.IAM.UserARN
		}
	}
	if lc, ok := core.GetRuntimeContextFromContextV2(ctx); ok && lc != nil {
		c.LambdaRequestID = lc.AwsRequestID
	}
	if h, ok := ctx.Value(rawHeadersKey{}).(map[string]string); ok {
		c.Headers = h
	}
	return c
}
