package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "latencyfs:", err)
		os.Exit(1)
	}
}

// run mounts, serves the counters, and unmounts on SIGINT or SIGTERM.
func run(args []string) error {
	cfg, statsAddr, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	m, err := mountFS(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "latencyfs: %s mounted at %s (read %v, write %v)\n",
		cfg.Root, cfg.Mountpoint, cfg.Latency.Read, cfg.Latency.Write)

	var srv *http.Server
	if statsAddr != "" {
		ln, err := net.Listen("tcp", statsAddr)
		if err != nil {
			m.unmount()
			return fmt.Errorf("stats: %w", err)
		}
		fmt.Fprintf(os.Stderr, "latencyfs: counters at http://%s/stats\n", ln.Addr())
		srv = &http.Server{Handler: statsHandler(m.stats, cfg.Latency), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
	}

	<-ctx.Done()
	stop() // a second signal kills
	if srv != nil {
		srv.Close()
	}
	err = m.unmount()
	m.snapshot().print(os.Stderr)
	return err
}

// parseFlags reads the command line. -latency sets both latencies; the
// specific flags win over it whatever their order.
func parseFlags(args []string) (cfg config, statsAddr string, err error) {
	fl := flag.NewFlagSet("latencyfs", flag.ContinueOnError)
	fl.StringVar(&cfg.Root, "root", "", "directory to serve (required)")
	fl.StringVar(&cfg.Mountpoint, "mnt", "", "where to mount it, created if missing (required)")
	fl.DurationVar(&cfg.Latency.Read, "read-latency", 0, "delay before each read-class op, e.g. 250us")
	fl.DurationVar(&cfg.Latency.Write, "write-latency", 0, "delay before each write-class op, e.g. 2.7ms")
	both := fl.Duration("latency", 0, "shorthand for the same -read-latency and -write-latency")
	fl.BoolVar(&cfg.Latency.BufferWrites, "buffer-writes", false, "make writes free and let fsync and close pay, as an NFS client's write-back cache does")
	fl.StringVar(&statsAddr, "stats-addr", "", "serve GET /stats and POST /reset here, e.g. 127.0.0.1:7070")
	fl.BoolVar(&cfg.XAttrs, "xattrs", false, "pass extended attributes through (EFS has none, so off)")
	fl.BoolVar(&cfg.AllowOther, "allow-other", false, "let users other than the mounting one use the mount (the Lambda emulator runs functions as uid 993)")
	fl.BoolVar(&cfg.Debug, "debug", false, "log every FUSE request")
	if err := fl.Parse(args); err != nil {
		return cfg, "", err
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["latency"] {
		if !set["read-latency"] {
			cfg.Latency.Read = *both
		}
		if !set["write-latency"] {
			cfg.Latency.Write = *both
		}
	}
	var problems []error
	if cfg.Root == "" {
		problems = append(problems, errors.New("-root is required"))
	}
	if cfg.Mountpoint == "" {
		problems = append(problems, errors.New("-mnt is required"))
	}
	if cfg.Latency.Read < 0 || cfg.Latency.Write < 0 {
		problems = append(problems, errors.New("latencies cannot be negative"))
	}
	if fl.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments: %q", fl.Args()))
	}
	return cfg, statsAddr, errors.Join(problems...)
}
