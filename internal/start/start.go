// Package start is how each Lambda function of this service starts: its
// JSON logger, its configuration from the environment, its store opened
// and checked, its handler handed to Lambda with a SIGTERM handler that
// closes the store. Each functions/<name>/main.go names its routes or its
// job, and calls one function here.
package start

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
)

// HTTP starts a function that serves routes (service.RoutePing, ...) of
// the service's API. readOnly opens the store for reading only, as the
// status function's read-only mount allows: a hot journal left by a
// crashed writer makes it answer 503 until the next /ping rolls it back.
func HTTP(readOnly bool, routes ...string) {
	log, cfg, store := open(readOnly)
	// Metrics go to stdout as EMF lines, which CloudWatch Logs ingests.
	opts := envconfig.Service(cfg, store, os.Stdout)
	opts.Routes, opts.Logger = routes, log
	api, err := service.New(opts)
	if err != nil {
		fatal(log, "api", err)
	}
	lambda.StartWithOptions(awslambda.HTTP(api), lambda.WithEnableSIGTERM(shutdown(store)))
}

// Prune starts the scheduled function that prunes the store.
func Prune() {
	log, cfg, store := open(false)
	handler := awslambda.Prune(store, cfg.Store.AuditRetention, time.Now, log)
	lambda.StartWithOptions(handler, lambda.WithEnableSIGTERM(shutdown(store)))
}

// open is what every function does first: the logger, the configuration,
// the store, ready or unavailable for now (stores.OpenReady).
func open(readOnly bool) (*slog.Logger, envconfig.Config, limiter.Store) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(log)
	cfg, err := envconfig.Read(os.Getenv, envconfig.Lambda)
	if err != nil {
		fatal(log, "configuration", err)
	}
	cfg.Store.ReadOnly = readOnly
	store, err := stores.OpenReady(context.Background(), cfg.Store, log)
	if err != nil {
		fatal(log, "open store", err)
	}
	return log, cfg, store
}

// shutdown is the SIGTERM handler of a function: Lambda sends SIGTERM
// before it retires an execution environment, with no invocation in
// flight. It closes the store and exits; aws-lambda-go runs the handler
// but would otherwise leave the process for Lambda to kill.
func shutdown(store io.Closer) func() {
	return func() {
		store.Close()
		os.Exit(0)
	}
}

// fatal logs why the function cannot start and exits; Lambda reports the
// init error and retries on the next invocation.
func fatal(log *slog.Logger, msg string, err error) {
	log.Error(msg, "error", err.Error())
	os.Exit(1)
}
