// Command prune is the scheduled Lambda function that deletes expired
// counter windows and, with AUDIT_RETENTION set, old audit rows.
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/stores"
)

func main() {
	log := awslambda.Logger()
	cfg, err := limiter.ConfigFromEnv(os.Getenv)
	if err != nil {
		awslambda.Fatal(log, "configuration", err)
	}
	store, err := stores.OpenReady(context.Background(), cfg.Store, log)
	if err != nil {
		awslambda.Fatal(log, "open store", err)
	}
	handler := awslambda.Prune(store, cfg.Store.AuditRetention, time.Now, log)
	lambda.StartWithOptions(handler, lambda.WithEnableSIGTERM(awslambda.Shutdown(store)))
}
