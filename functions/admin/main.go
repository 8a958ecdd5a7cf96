// Command admin is the Lambda function behind /admin/: per-key overrides
// (PUT, GET, DELETE /admin/overrides/{policy}/{key}) and resets (DELETE
// /admin/counters/{policy}/{key}), IAM-authorized, each action logged with
// the principal who asked.
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
	api := httpapi.New(httpapi.Options{
		Store:  store,
		Rules:  cfg.Rules,
		Routes: []string{httpapi.RouteAdmin},
		Logger: log,
	})
	lambda.StartWithOptions(awslambda.HTTP(api), lambda.WithEnableSIGTERM(awslambda.Shutdown(store)))
}
