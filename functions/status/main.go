// Command status is the Lambda function behind GET /status?key=: it reads a
// key's counter for the current window and never counts anything.
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
	// Reads only, as its read-only mount allows: a hot journal left by a
	// crashed writer makes it answer 503 until the next /ping rolls it back.
	cfg.Store.ReadOnly = true
	store, err := stores.OpenReady(context.Background(), cfg.Store, log)
	if err != nil {
		awslambda.Fatal(log, "open store", err)
	}
	api := httpapi.New(httpapi.Options{
		Store:  store,
		Rules:  cfg.Rules,
		Routes: []string{httpapi.RouteStatus},
		Logger: log,
	})
	lambda.StartWithOptions(awslambda.HTTP(api), lambda.WithEnableSIGTERM(awslambda.Shutdown(store)))
}
