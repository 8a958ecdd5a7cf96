// Command ping is the Lambda function behind GET /ping and POST /check: it
// counts an attempt and decides it, answering /ping 200, or 429 once the
// key is over its limit, and /check with the decision as data.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/stores"
)

func main() {
	log := awslambda.Logger()
	cfg, err := httpapi.ConfigFromEnv(os.Getenv)
	if err != nil {
		awslambda.Fatal(log, "configuration", err)
	}
	store, err := stores.OpenReady(context.Background(), cfg.Store, log)
	if err != nil {
		awslambda.Fatal(log, "open store", err)
	}
	// Metrics go to stdout as EMF lines, which CloudWatch Logs ingests.
	opts := httpapi.FromConfig(cfg, store, os.Stdout)
	opts.Routes, opts.Logger = []string{httpapi.RoutePing, httpapi.RouteCheck}, log
	lambda.StartWithOptions(awslambda.HTTP(httpapi.New(opts)), lambda.WithEnableSIGTERM(awslambda.Shutdown(store)))
}
