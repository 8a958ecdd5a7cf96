package limiter

import (
	"strings"
	"time"
)

// Defaults for the settings ConfigFromEnv reads.
const (
	DefaultLimit       = 3
	DefaultWindow      = 60 * time.Second
	DefaultBusyTimeout = 3 * time.Second
	DefaultJournalMode = "DELETE"
	// MaxShards bounds SQLITE_SHARDS: each shard is a file with its own
	// lock, connection and prune pass, and a request's checks attach at
	// most as many files as it has checks.
	MaxShards = 64
	// MaxBusyTimeout keeps the lock wait inside the functions' 10 s timeout
	// (and API Gateway's 30 s), with time left to answer.
	MaxBusyTimeout = 9 * time.Second
)

// Config is what every host of the limiter (the Lambda functions, the local
// server) shares, read from the environment by ConfigFromEnv.
type Config struct {
	// Rules are the policies applied to requests (POLICIES; without it,
	// one policy named DefaultPolicyName from RATE_LIMIT, WINDOW_SECONDS
	// and CLIENT_KEY_SOURCE). With SHADOW=on every one is a shadow.
	Rules []Rule
	// FailMode says what a request gets when the store fails (FAIL_MODE).
	FailMode FailMode
	// RejectCache answers keys already denied in the current window from
	// this process's memory (REJECT_CACHE=on); see RejectCache.
	RejectCache bool
	// Metrics says whether to write CloudWatch EMF lines (METRICS=emf, the
	// default, or off), under MetricsNamespace (METRICS_NAMESPACE).
	Metrics          bool
	MetricsNamespace string
	// Store says where the counters live.
	Store StoreConfig
}

// StoreKind names a store.
type StoreKind string

// Stores a Config can name (STORE).
const (
	StoreSQLite   StoreKind = "sqlite"
	StoreDynamoDB StoreKind = "dynamodb"
)

// StoreConfig says which store keeps the counters, and tunes it.
type StoreConfig struct {
	// Kind is StoreSQLite (the default, also when empty) or StoreDynamoDB
	// (STORE).
	Kind StoreKind
	// Table and Endpoint locate the DynamoDB table (TABLE_NAME, and
	// DYNAMODB_ENDPOINT to use a local implementation); region and
	// credentials come from the AWS SDK's usual chain.
	Table    string
	Endpoint string

	// Path is the SQLite database file (DB_PATH).
	Path string
	// Shards is how many SQLite files the counters are spread over
	// (SQLITE_SHARDS, 1 to MaxShards; zero means 1): shard 0 is Path,
	// shard i is Path + ".shard-<i>", and each key's counters live in the
	// shard its client key hashes to (so one key's policies share one).
	// Zero means 1. The files record the count they were
	// created with, and a store configured with another refuses them.
	Shards int
	// JournalMode is SQLite's journal mode (JOURNAL_MODE): DELETE,
	// TRUNCATE or PERSIST, the rollback journals, which work across hosts
	// on EFS. ConfigFromEnv never gives WAL, whose index lives in shared
	// memory on one host; a host that is one machine (the local server)
	// may set it. Empty means DELETE.
	JournalMode string
	// BusyTimeout bounds each wait for the database lock, or for DynamoDB
	// to accept a write that conflicted or was throttled (BUSY_TIMEOUT).
	// Zero means DefaultBusyTimeout, 3 s.
	BusyTimeout time.Duration
	// AuditRetention is how long audit records are kept; zero keeps them
	// forever (AUDIT_RETENTION). SQLite's prune deletes older ones;
	// DynamoDB's records carry it as their time to live.
	AuditRetention time.Duration
	// ReadOnly opens the database for reading only, as the status function
	// does on its read-only mount: no migrations, no writes.
	ReadOnly bool
	// SQLiteBusyHandler leaves waiting for other processes' locks to
	// SQLite's own busy handler instead of the store's fairer one. It exists
	// to measure the difference (loadtest -busy-handler sqlite).
	SQLiteBusyHandler bool
	// MaxBatch bounds how many decisions of one process the SQLite store
	// decides in one transaction (group commit); zero means its default,
	// and 1 decides each in a transaction of its own, as before group
	// commit. It exists to measure the difference (loadtest -batch).
	MaxBatch int
}

// ConfigError lists every problem found in the configuration.
type ConfigError struct {
	Problems []error
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		// A problem of several lines (POLICIES) is indented under its name.
		lines[i] = "  " + strings.ReplaceAll(p.Error(), "\n", "\n    ")
	}
	return "invalid configuration:\n" + strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e *ConfigError) Unwrap() []error { return e.Problems }

var _ error = (*ConfigError)(nil)
