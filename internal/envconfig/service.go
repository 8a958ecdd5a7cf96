package envconfig

import (
	"io"

	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// Service returns the service.Options that cfg describes for a /ping
// handler on store: cfg's policies and fail mode; with REJECT_CACHE=on,
// store behind a reject cache, so that keys already denied are denied
// again from memory;
// with METRICS=emf, EMF lines written to metricsOut (stdout, which
// CloudWatch Logs ingests). The caller adds Routes, Caller and Logger. The
// ping function and the local server both start from it, so they decide
// alike.
func Service(cfg Config, store limiter.Store, metricsOut io.Writer) service.Options {
	opts := service.Options{Store: store, Rules: cfg.Rules, FailMode: cfg.FailMode}
	if cfg.RejectCache {
		opts.Store = rejectcache.New(store, rejectcache.DefaultSize)
	}
	if cfg.Metrics {
		opts.Metrics = metrics.New(metricsOut, cfg.MetricsNamespace)
	}
	return opts
}
