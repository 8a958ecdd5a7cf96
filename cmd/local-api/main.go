// Command local-api serves the rate limiter's HTTP API on this machine, with
// the same handler as the Lambda functions and SQLite in a local file:
//
//	go run ./cmd/local-api
//
// It listens on ADDR (default 127.0.0.1:3000, where `sam local start-api`
// listens), keeps the database at DB_PATH (default ./data/ratelimit.db,
// directory created), prunes every PRUNE_INTERVAL (default 1m) and shuts down
// cleanly on SIGINT and SIGTERM. The other settings are the functions'.
//
// With -check it reads the configuration, prints the policies it gives and
// exits, 0 if it is good and 2 if not: a way to try a POLICIES value before
// deploying it as the template's Policies parameter.
//
//	POLICIES='[{"name":"burst","limit":5,"window":"1s"}]' go run ./cmd/local-api -check
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/stores"
)

// requestTimeout bounds each request as the template's function timeout
// bounds an invocation, so a held lock answers with the fail mode here too.
const requestTimeout = 10 * time.Second

func main() {
	check := flag.Bool("check", false, "check the configuration as the functions read it, print its policies and exit")
	flag.Parse()
	if *check {
		os.Exit(checkConfig(os.Stdout, os.Stderr, os.Getenv))
	}
	cfg, err := limiter.LocalConfigFromEnv(os.Getenv)
	if err != nil {
		// For a person at a terminal: plain text, one problem a line.
		fmt.Fprintln(os.Stderr, "local-api:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	if err := run(log, cfg); err != nil {
		log.Error("local-api", "error", err.Error())
		os.Exit(1)
	}
}

// checkConfig reads the configuration as the Lambda functions do (with the
// DB_PATH and TABLE_NAME the template gives them, if unset), prints its
// policies to out and returns 0, or prints every problem to errOut and
// returns 2.
func checkConfig(out, errOut io.Writer, getenv func(string) string) int {
	cfg, err := limiter.ConfigFromEnv(func(k string) string {
		v := getenv(k)
		if v == "" && k == "DB_PATH" {
			return "/mnt/efs/ratelimit.db"
		}
		if v == "" && k == "TABLE_NAME" {
			return "ratelimit"
		}
		return v
	})
	if err != nil {
		fmt.Fprintln(errOut, "local-api:", err)
		return 2
	}
	for _, r := range cfg.Rules {
		fmt.Fprintln(out, describe(r))
	}
	if getenv("POLICIES") != "" && (getenv("RATE_LIMIT") != "" || getenv("WINDOW_SECONDS") != "") {
		fmt.Fprintln(out, "(POLICIES replaces RATE_LIMIT and WINDOW_SECONDS, which are ignored)")
	}
	return 0
}

// describe says what a rule limits, as a person checking it reads it.
func describe(r limiter.Rule) string {
	p := r.Policy
	algorithm, shadow := limiter.Fixed, ""
	if p.IsSliding() {
		algorithm = limiter.Sliding
	}
	if p.Shadow {
		shadow = " shadow"
	}
	return fmt.Sprintf("%s: %d per %v, %s window, key %s, routes %v%s", p.Name, p.Limit, p.Window, algorithm, r.KeySource, r.Routes, shadow)
}

func run(log *slog.Logger, cfg limiter.Config) error {
	addr, pruneEvery := cfg.Addr, cfg.PruneInterval
	if cfg.Store.Kind == limiter.StoreSQLite {
		if err := os.MkdirAll(filepath.Dir(cfg.Store.Path), 0o755); err != nil {
			return fmt.Errorf("create database directory: %w", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := stores.Open(ctx, cfg.Store)
	if store == nil {
		return err
	}
	defer store.Close()
	if err != nil {
		log.Warn("store not ready; answering with the fail mode until it is", "error", err.Error())
	}

	// METRICS=emf prints the lines the functions write among the logs.
	opts := httpapi.Configured(cfg, store, os.Stdout)
	opts.Logger = log
	api := httpapi.New(opts)
	srv := &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
			defer cancel()
			if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
				// The API reads no body. Close the connection after
				// answering rather than wait to read one that may never
				// finish arriving.
				w.Header().Set("Connection", "close")
			}
			api.ServeHTTP(w, r.WithContext(rctx))
		}),
		// A client that never finishes its request (a GET with a body it
		// does not send, say) would otherwise hold a connection forever.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout + 5*time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	go prune(ctx, log, store, pruneEvery, cfg.AuditRetention)

	// Bind before saying so: a client that reads "listening" may connect.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	where := []any{"store", cfg.Store.Kind, "db", cfg.Store.Path, "journal_mode", cfg.Store.JournalMode}
	if cfg.Store.Kind == limiter.StoreDynamoDB {
		where = []any{"store", cfg.Store.Kind, "table", cfg.Store.Table, "endpoint", cfg.Store.Endpoint}
	}
	policies := make([]string, len(cfg.Rules))
	for i, r := range cfg.Rules {
		policies[i] = describe(r)
	}
	log.Info("listening", append([]any{"addr", "http://" + addr, "policies", policies}, where...)...)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// prune deletes expired windows and old audit rows every interval, as the
// scheduled function does in AWS.
func prune(ctx context.Context, log *slog.Logger, store limiter.Store, every, retention time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		pruned, err := store.Prune(ctx, now, limiter.AuditBefore(now, retention))
		if err != nil {
			log.Warn("prune", "error", err.Error())
			continue
		}
		log.Info("prune", "windows_deleted", pruned.Windows, "audit_deleted", pruned.Audit)
	}
}
