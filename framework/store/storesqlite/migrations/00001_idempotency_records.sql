-- +goose Up
-- Idempotency records of the POST fallback (fallback/postkeys). The primary
-- key is the concurrency control: a claim is one INSERT … ON CONFLICT
-- statement against it. Every time is written and compared on the
-- database clock (SQLite's 'now'), always as UTC text
-- 'YYYY-MM-DD HH:MM:SS.SSS', so that times compare correctly as text.
--
-- fence is the fencing token of the attempt that owns the record. SQLite
-- has no sequences: idempotency_fence holds the last token handed out, a
-- claim takes last + 1, and the triggers below move last forward in the
-- same statement (SQLite runs one writer at a time). So a token never
-- repeats for a key: not after a release, a re-claim, or the janitor's
-- delete. attempt only counts the attempts of the record's current life.
CREATE TABLE idempotency_fence (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
);
INSERT INTO idempotency_fence (id, last) VALUES (1, 0);
CREATE TABLE idempotency_records (
    tenant_id           TEXT     NOT NULL,
    operation           TEXT     NOT NULL,
    idem_key            TEXT     NOT NULL,
    fingerprint         TEXT     NOT NULL,
    fingerprint_version INTEGER  NOT NULL,
    state               TEXT     NOT NULL CHECK (state IN ('in_progress', 'completed', 'unknown')),
    recovery_point      TEXT     NOT NULL,
    attempt             INTEGER  NOT NULL,
    fence               INTEGER  NOT NULL,
    locked_until        DATETIME,
    response_status     INTEGER,
    response_headers    TEXT,
    response_body       BLOB,
    -- true when the body was over the cap and is re-rendered from
    -- resource_ref on replay
    response_truncated  BOOLEAN  NOT NULL DEFAULT FALSE,
    resource_ref        TEXT,
    error_code          TEXT,
    created_at          DATETIME NOT NULL,
    updated_at          DATETIME NOT NULL,
    expires_at          DATETIME NOT NULL,
    PRIMARY KEY (tenant_id, operation, idem_key)
) WITHOUT ROWID;
-- The janitor deletes expired completed rows in batches by expires_at.
CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at);
-- The recovery worker and the gauges look only at unfinished rows.
CREATE INDEX idempotency_records_unfinished ON idempotency_records (state, locked_until)
    WHERE state <> 'completed';
-- +goose StatementBegin
CREATE TRIGGER idempotency_records_fence_insert AFTER INSERT ON idempotency_records
BEGIN
    UPDATE idempotency_fence SET last = max(last, NEW.fence) WHERE id = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER idempotency_records_fence_update AFTER UPDATE OF fence ON idempotency_records
BEGIN
    UPDATE idempotency_fence SET last = max(last, NEW.fence) WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE idempotency_records;
DROP TABLE idempotency_fence;
