// Package envconfig reads this service's configuration from the
// environment, for the Lambda functions and the local server alike: the
// policies (POLICIES, or the seed's RATE_LIMIT and WINDOW_SECONDS), the
// fail mode, the reject cache, metrics, and the store's settings. Every
// problem is reported at once, one line each, named by its variable.
//
// The rules that are the environment's own live here, once: JOURNAL_MODE
// WAL only on one machine (the local server), BUSY_TIMEOUT inside the
// functions' timeout, a CloudWatch namespace CloudWatch accepts. What a
// store would refuse it asks the store (stores.Validate), and what a
// route pattern must be, the HTTP layer; the domain reads no environment.
package envconfig

import (
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
)

// Defaults of the settings Read reads.
const (
	DefaultLimit  = 3
	DefaultWindow = 60 * time.Second
	// MaxBusyTimeout keeps the lock wait inside the functions' 10 s
	// timeout (and API Gateway's 30 s), with time left to answer.
	MaxBusyTimeout = 9 * time.Second
)

// Config is what every host of the limiter (the Lambda functions, the
// local server) shares.
type Config struct {
	// Rules are the policies applied to requests (POLICIES; without it,
	// one policy named DefaultPolicyName from RATE_LIMIT, WINDOW_SECONDS
	// and CLIENT_KEY_SOURCE). With SHADOW=on every one is a shadow.
	Rules []limiter.Rule
	// FailMode says what a request gets when the store fails (FAIL_MODE).
	FailMode limiter.FailMode
	// RejectCache answers keys already denied in the current window from
	// this process's memory (REJECT_CACHE=on); see internal/rejectcache.
	RejectCache bool
	// Metrics says whether to write CloudWatch EMF lines (METRICS=emf, the
	// default, or off), under MetricsNamespace (METRICS_NAMESPACE).
	Metrics          bool
	MetricsNamespace string
	// Store says where the counters live (STORE and the variables of the
	// store it names).
	Store stores.Config
}

// Host is what reads the configuration. The functions run in execution
// environments that are each a host of their own; the local server is one
// machine.
type Host int

const (
	// Lambda is the functions: DB_PATH is required, WAL is refused.
	Lambda Host = iota
	// Local is the local server: DB_PATH defaults to DefaultLocalPath,
	// METRICS to off (stdout is for people there), and JOURNAL_MODE may
	// be WAL, whose shared-memory index works between the processes of one
	// host.
	Local
)

// DefaultLocalPath is the local server's database when DB_PATH is unset.
const DefaultLocalPath = "./data/ratelimit.db"

// ConfigError lists every problem found in the configuration.
type ConfigError struct {
	Problems []error
}

func (e *ConfigError) Error() string {
	return "invalid configuration:\n" + e.List()
}

// List is the problems, one a line, each indented under the line that
// introduces them (Error's, or local-api -check's).
func (e *ConfigError) List() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		// A problem of several lines (POLICIES) is indented under its name.
		lines[i] = "  " + strings.ReplaceAll(p.Error(), "\n", "\n    ")
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e *ConfigError) Unwrap() []error { return e.Problems }

var _ error = (*ConfigError)(nil)
