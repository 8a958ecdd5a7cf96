-- Costs: an audit row records how many requests its attempt counted as.
ALTER TABLE api_calls ADD COLUMN cost INTEGER NOT NULL DEFAULT 1;

-- GCRA buckets: one row per key, its theoretical arrival time (TAT) in Unix
-- nanoseconds, and the emission interval it was written with, so that a
-- change of the key's rate (an override) rescales what the bucket holds
-- back. A row whose TAT has passed says no more than a missing row (a fresh
-- key's bucket), so pruning deletes it.
CREATE TABLE IF NOT EXISTS gcra_buckets (
    key      TEXT    NOT NULL PRIMARY KEY, -- the policy's store key
    tat      INTEGER NOT NULL,
    emission INTEGER NOT NULL DEFAULT 0    -- nanoseconds; 0: unknown
) WITHOUT ROWID;

-- Overrides: a limit (and a GCRA burst) for one key under one policy, set at
-- run time through the admin API. Keyed like the counters, by the policy's
-- store key, so that a decision reads it with one lookup in its own
-- transaction; pruning never touches it.
CREATE TABLE IF NOT EXISTS overrides (
    key        TEXT    NOT NULL PRIMARY KEY, -- the policy's store key
    policy     TEXT    NOT NULL,
    client_key TEXT    NOT NULL,
    "limit"    INTEGER NOT NULL,
    burst      INTEGER NOT NULL DEFAULT 0, -- 0: the policy's
    updated_at TEXT    NOT NULL
) WITHOUT ROWID;
