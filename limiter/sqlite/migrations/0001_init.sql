-- Counters: one row per (key, window). The primary key is the design note's;
-- WITHOUT ROWID makes that key the table's own b-tree, so an increment finds
-- and rewrites one leaf instead of walking an index and then the table. The
-- note's extra index on (key, window_start) duplicated the primary key and is
-- not created: it would cost a second b-tree write on every new window and
-- serve no query.
--
-- window_seconds is the length of the window the row counts, so that pruning
-- honours each policy's own window when several share the database. Pruning
-- walks the primary key in bounded batches rather than using an index on the
-- expiry: an index would add a page write to every new window on the request
-- path to save work on the prune path.
CREATE TABLE IF NOT EXISTS rate_limit_windows (
    key            TEXT    NOT NULL,
    window_start   TEXT    NOT NULL, -- YYYY-MM-DDTHH:MM:SSZ, UTC, truncated to the window
    count          INTEGER NOT NULL DEFAULT 0,
    window_seconds INTEGER NOT NULL,
    PRIMARY KEY (key, window_start)
) WITHOUT ROWID;

-- Audit: one row per allowed request, appended in the same transaction as the
-- increment that allowed it. The rowid grows in commit order, so rows are
-- appended to the last leaf and pruning deletes a rowid prefix; no index on
-- called_at is kept for the same reason as above.
CREATE TABLE IF NOT EXISTS api_calls (
    id           INTEGER PRIMARY KEY,
    key          TEXT    NOT NULL, -- the client key exactly
    window_start TEXT    NOT NULL,
    called_at    TEXT    NOT NULL, -- YYYY-MM-DDTHH:MM:SS.sssZ, UTC
    route        TEXT    NOT NULL,
    request_id   TEXT    NOT NULL
);
