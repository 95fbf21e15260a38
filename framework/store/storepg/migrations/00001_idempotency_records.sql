-- +goose Up
-- Idempotency records of the POST fallback (fallback/postkeys). The primary
-- key is the concurrency control: a claim is one INSERT … ON CONFLICT
-- statement against it. Every time is written and compared on the
-- database clock (statement_timestamp()), never a process clock.
--
-- fence is the fencing token of the attempt that owns the record. It is
-- drawn from a sequence, so it never repeats for a key: not after a
-- release, a re-claim, or the janitor's delete. attempt only counts the
-- attempts of the record's current life, for people and logs.
CREATE SEQUENCE idempotency_records_fence_seq AS BIGINT;
CREATE TABLE idempotency_records (
    tenant_id           TEXT        NOT NULL,
    operation           TEXT        NOT NULL,
    idem_key            TEXT        NOT NULL,
    fingerprint         TEXT        NOT NULL,
    fingerprint_version INTEGER     NOT NULL,
    state               TEXT        NOT NULL CHECK (state IN ('in_progress', 'completed', 'unknown')),
    recovery_point      TEXT        NOT NULL,
    attempt             BIGINT      NOT NULL,
    fence               BIGINT      NOT NULL,
    locked_until        TIMESTAMPTZ,
    response_status     INTEGER,
    response_headers    TEXT,
    response_body       BYTEA,
    -- true when the body was over the cap and is re-rendered from
    -- resource_ref on replay
    response_truncated  BOOLEAN     NOT NULL DEFAULT FALSE,
    resource_ref        TEXT,
    error_code          TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    expires_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, operation, idem_key)
);
-- The janitor deletes expired completed rows in batches by expires_at.
CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at);
-- The recovery worker and the gauges look only at unfinished rows.
CREATE INDEX idempotency_records_unfinished ON idempotency_records (state, locked_until)
    WHERE state <> 'completed';

-- +goose Down
DROP TABLE idempotency_records;
DROP SEQUENCE idempotency_records_fence_seq;
