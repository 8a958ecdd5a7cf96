// Command local-api serves the rate limiter's HTTP API on this machine, with
// the same handler as the Lambda functions and SQLite in a local file:
//
//	go run ./cmd/local-api
//
// It listens on ADDR (default 127.0.0.1:3000, where `sam local start-api`
// listens), keeps the database at DB_PATH (default ./data/ratelimit.db; the
// file's directory is created, not those above it), prunes every PRUNE_INTERVAL (default 1m) and shuts down
// cleanly on SIGINT and SIGTERM. Unless GOGC is set, it collects garbage
// at GOGC=400 rather than Go's 100 (see gcPercent). The other settings are
// the functions'.
//
// With -check it reads the configuration as the server would, prints all of
// it that takes effect and whether the Lambda functions would accept it,
// and exits, 0 if it is good and 2 if not: a way to try a POLICIES value
// before deploying it as the template's Policies parameter.
//
//	POLICIES='[{"name":"burst","limit":5,"window":"1s"}]' go run ./cmd/local-api -check
//
// With -version it prints the module's version, as the go command recorded
// it in the binary, and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/jsonlog"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
)

// requestTimeout bounds each request as the template's function timeout
// bounds an invocation, so a held lock answers with the fail mode here too.
const requestTimeout = 10 * time.Second

func main() {
	check := flag.Bool("check", false, "check the configuration as the server reads it, print it and exit: 0 if good, 2 if not")
	version := flag.Bool("version", false, "print the module's version and exit")
	flag.Parse()
	if flag.NArg() > 0 {
		// The configuration is the environment's: an argument is a
		// mistake, such as a variable written after the command.
		fmt.Fprintf(os.Stderr, "local-api: unexpected argument %q: settings are environment variables, e.g. RATE_LIMIT=5 local-api\n", flag.Arg(0))
		os.Exit(2)
	}
	if *version {
		bi, _ := debug.ReadBuildInfo()
		fmt.Println(versionLine(bi))
		return
	}
	if *check {
		os.Exit(checkConfig(os.Stdout, os.Stderr, os.Getenv))
	}
	cfg, err := readConfig(os.Getenv)
	if err != nil {
		// For a person at a terminal: plain text, one problem a line.
		fmt.Fprintln(os.Stderr, "local-api:", err)
		os.Exit(2)
	}
	tuneGC(os.Getenv)
	out := newLogOut(os.Stdout)
	log := slog.New(jsonlog.New(out))
	err = run(log, out, cfg)
	if err != nil {
		log.Error("local-api", "error", err.Error())
		// For the person who started it too, as a configuration's
		// problems are told, not only in the log on stdout.
		fmt.Fprintln(os.Stderr, "local-api:", err)
	}
	out.Close()
	if err != nil {
		os.Exit(1)
	}
}

// versionLine is what -version prints: the module's version as the go
// command recorded it in bi, and the Go release that built it. Installed
// with go install github.com/ft251/ratelimit/cmd/local-api@v0.1.0, that is
// v0.1.0; built in a checkout, a pseudo-version of its commit (or
// "(devel)", when the go command records none, as under go run).
func versionLine(bi *debug.BuildInfo) string {
	if bi == nil {
		return "local-api: the binary records no build information"
	}
	return fmt.Sprintf("local-api %s %s", bi.Main.Version, bi.GoVersion)
}

// run serves cfg until SIGINT or SIGTERM, logging to log, whose lines
// and the metrics' go to out.
func run(log *slog.Logger, out io.Writer, cfg config) error {
	if err := makeDBDir(log, cfg); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Store.Kind == stores.Memory {
		log.Warn("STORE=memory counts in this process alone: its counts are lost when it stops, and other processes (other servers, the Lambda functions) do not see them")
	}
	store, err := stores.OpenReady(ctx, cfg.Store, log)
	if err != nil {
		return err
	}
	defer store.Close()

	// METRICS=emf prints the lines the functions write among the logs.
	opts := envconfig.Service(cfg.Config, store, out)
	opts.Logger = log
	opts.Routes = []string{service.RoutePing, service.RouteStatus, service.RouteCheck}
	if cfg.Admin {
		opts.Routes = append(opts.Routes, service.RouteAdmin)
	}
	api, err := service.New(opts)
	if err != nil {
		return err
	}
	srv := newServer(cfg.Addr, api)
	go prune(ctx, log, store, cfg.PruneInterval, cfg.Store.AuditRetention)

	// Bind before saying so: a client that reads "listening" may connect.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return listenError(cfg.Addr, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logListening(log, cfg, ln.Addr())
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

// listenError says that the server cannot listen on ADDR, addr.
func listenError(addr string, err error) error {
	if cause := errors.Unwrap(err); cause != nil {
		err = cause // net's "listen tcp ADDR:" prefix, said here already
	}
	return fmt.Errorf("ADDR: cannot listen on %s: %w", addr, err)
}

// makeDBDir makes the SQLite file's own directory (./data by default), not
// the directories above it: a DB_PATH with a typo is an error, not a new
// tree.
func makeDBDir(log *slog.Logger, cfg config) error {
	if cfg.Store.Kind != stores.SQLite {
		return nil
	}
	dir := filepath.Dir(cfg.Store.Path)
	switch err := os.Mkdir(dir, 0o755); {
	case err == nil:
		log.Info("created the database directory", "dir", dir)
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("DB_PATH: create its directory: %w", err)
	default:
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return fmt.Errorf("DB_PATH: %s is a file, not a directory", dir)
		}
	}
	return nil
}

// newServer serves h on addr, each request bounded as the template's
// function timeout bounds an invocation.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
			defer cancel()
			if reads := r.Method == http.MethodPost || r.Method == http.MethodPut; !reads && (r.ContentLength != 0 || len(r.TransferEncoding) > 0) {
				// A body no route reads (a GET's): close the connection
				// after answering rather than wait to read a body that
				// may never finish arriving. POST /check and the admin
				// PUT read theirs, bounded by ReadTimeout.
				w.Header().Set("Connection", "close")
			}
			h.ServeHTTP(w, r.WithContext(rctx))
		}),
		// A client that never finishes its request (a GET with a body it
		// does not send, say) would otherwise hold a connection forever.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout + 5*time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// logListening says where the server listens and what it limits: the line
// clients (and the tests) wait for before they connect.
func logListening(log *slog.Logger, cfg config, addr net.Addr) {
	where := []any{"store", cfg.Store.Kind, "db", cfg.Store.Path, "journal_mode", cfg.Store.JournalMode, "shards", max(cfg.Store.Shards, 1)}
	switch cfg.Store.Kind {
	case stores.DynamoDB:
		where = []any{"store", cfg.Store.Kind, "table", cfg.Store.Table, "endpoint", cfg.Store.Endpoint}
	case stores.Memory:
		where = []any{"store", cfg.Store.Kind}
	}
	policies := make([]string, len(cfg.Rules))
	for i, r := range cfg.Rules {
		policies[i] = describe(r)
	}
	log.Info("listening", append([]any{"addr", "http://" + addr.String(), "policies", policies}, where...)...)
}

// prune deletes expired windows and old audit rows every interval, as the
// scheduled function does in AWS, and logs each run as the function does:
// at debug when it deleted nothing.
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
		pruned, err := store.Prune(ctx, now, decide.AuditBefore(now, retention))
		attrs := []any{"windows_deleted", pruned.Windows, "buckets_deleted", pruned.Buckets, "audit_deleted", pruned.Audit, "super_journals_deleted", pruned.SuperJournals}
		if err != nil {
			attrs = append(attrs, "error", err.Error())
		}
		log.Log(ctx, decide.PruneLevel(pruned, err), "prune", attrs...)
	}
}
