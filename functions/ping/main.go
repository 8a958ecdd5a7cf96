// Command ping is the Lambda function behind GET /ping: it counts the
// caller's attempt and answers 200, or 429 once the key is over its limit.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/metrics"
	"github.com/ft251/ratelimit/limiter/stores"
)

func main() {
	log := awslambda.Logger()
	cfg, err := limiter.ConfigFromEnv(os.Getenv)
	if err != nil {
		awslambda.Fatal(log, "configuration", err)
	}
	store, err := stores.Open(context.Background(), cfg.Store)
	if store == nil {
		awslambda.Fatal(log, "open store", err)
	}
	if err != nil {
		log.Warn("store not ready; answering with the fail mode until it is", "error", err.Error())
	}
	// With REJECT_CACHE=on, keys denied in this window are denied again from
	// memory, without a round trip to EFS.
	var decider limiter.Store = store
	if cfg.RejectCache {
		decider = limiter.NewRejectCache(store, limiter.DefaultRejectCacheSize)
	}
	// Metrics go to stdout as EMF lines, which CloudWatch Logs ingests.
	var emf *metrics.EMF
	if cfg.Metrics {
		emf = metrics.New(os.Stdout, cfg.MetricsNamespace)
	}
	api := httpapi.New(httpapi.Options{
		Store:    decider,
		Rules:    cfg.Rules,
		FailMode: cfg.FailMode,
		Routes:   []string{httpapi.RoutePing},
		Caller:   awslambda.Caller,
		Logger:   log,
		Metrics:  emf,
	})
	lambda.StartWithOptions(awslambda.HTTP(api), lambda.WithEnableSIGTERM(awslambda.Shutdown(store)))
}
