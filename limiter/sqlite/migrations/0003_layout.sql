-- Layout: which shard of how many this file is (SQLITE_SHARDS). One row,
-- written when a store first opens the file; a store configured for another
-- count refuses the file rather than count a key in two places.
CREATE TABLE IF NOT EXISTS layout (
    id     INTEGER PRIMARY KEY CHECK (id = 0),
    shard  INTEGER NOT NULL, -- this file's index: 0 is DB_PATH itself
    shards INTEGER NOT NULL  -- how many files the counters are spread over
);
