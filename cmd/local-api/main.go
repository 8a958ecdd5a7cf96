// Command local-api serves the rate limiter's HTTP API on this machine, with
// the same handler as the Lambda functions and SQLite in a local file:
//
//	go run ./cmd/local-api
//
// It listens on ADDR (default 127.0.0.1:3000, where `sam local start-api`
// listens), keeps the database at DB_PATH (default ./data/ratelimit.db,
// directory created), prunes every PRUNE_INTERVAL (default 1m) and shuts down
// cleanly on SIGINT and SIGTERM. The other settings are the functions'.
package main

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// requestTimeout bounds each request as the template's function timeout
// bounds an invocation, so a held lock answers with the fail mode here too.
const requestTimeout = 10 * time.Second

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	if err := run(log); err != nil {
		log.Error("local-api", "error", err.Error())
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := limiter.LocalConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	addr := envOr("ADDR", "127.0.0.1:3000")
	pruneEvery, err := time.ParseDuration(envOr("PRUNE_INTERVAL", "1m"))
	if err != nil || pruneEvery <= 0 {
		return fmt.Errorf("PRUNE_INTERVAL: %q is not a positive duration, e.g. 1m", os.Getenv("PRUNE_INTERVAL"))
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Store.Path), 0o755); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := sqlite.Open(ctx, cfg.Store)
	if store == nil {
		return err
	}
	defer store.Close()
	if err != nil {
		log.Warn("store not ready; answering with the fail mode until it is", "error", err.Error())
	}

	var decider limiter.Store = store
	if cfg.RejectCache {
		decider = limiter.NewRejectCache(store, limiter.DefaultRejectCacheSize)
	}
	api := httpapi.New(httpapi.Options{
		Store:     decider,
		Policy:    cfg.PingPolicy(),
		KeySource: cfg.KeySource,
		FailMode:  cfg.FailMode,
		Logger:    log,
	})
	srv := &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
			defer cancel()
			api.ServeHTTP(w, r.WithContext(rctx))
		}),
		ReadHeaderTimeout: 5 * time.Second,
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
	log.Info("listening", "addr", "http://"+addr, "db", store.Path(), "limit", cfg.Limit,
		"window_seconds", int64(cfg.Window/time.Second), "journal_mode", cfg.Store.JournalMode)
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
