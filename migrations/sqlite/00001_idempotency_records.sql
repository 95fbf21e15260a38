-- +goose Up
-- Idempotency records of the POST fallback (fallback/postkeys). The primary
-- key is the concurrency control: a claim is one INSERT … ON CONFLICT
-- statement against it. Times are written from the engine's clock, in UTC,
-- so that they compare as text.
CREATE TABLE idempotency_records (
    tenant_id           TEXT     NOT NULL,
    operation           TEXT     NOT NULL,
    idem_key            TEXT     NOT NULL,
    fingerprint         TEXT     NOT NULL,
    fingerprint_version INTEGER  NOT NULL,
    state               TEXT     NOT NULL CHECK (state IN ('in_progress', 'completed', 'unknown')),
    recovery_point      TEXT     NOT NULL,
    attempt             INTEGER  NOT NULL,
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

-- +goose Down
DROP TABLE idempotency_records;
