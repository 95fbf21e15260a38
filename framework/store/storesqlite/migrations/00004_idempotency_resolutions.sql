-- +goose Up
-- The audit trail of operators' resolutions (postkeys.Resolve, the
-- retrysafe command's "records resolve"): one row per record an operator
-- settled by hand, written in the transaction that completed the record,
-- so that a resolution without its audit row (or the reverse) never
-- commits. Rows are kept: the janitor does not delete them.
CREATE TABLE idempotency_resolutions (
    id             INTEGER     PRIMARY KEY AUTOINCREMENT,
    tenant_id      TEXT        NOT NULL,
    operation      TEXT        NOT NULL,
    -- SHA-256 of the idempotency key (hex): the audit trail never holds a
    -- raw key.
    key_hash       TEXT        NOT NULL,
    -- the fence of the resolution's takeover
    fence          BIGINT      NOT NULL,
    -- the state the operator found: unknown, or in_progress past its lease
    from_state     TEXT        NOT NULL,
    outcome        TEXT        NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
    status         INTEGER     NOT NULL,
    reference      TEXT,
    error_code     TEXT,
    actor          TEXT        NOT NULL,
    reason         TEXT        NOT NULL,
    resolved_at    DATETIME    NOT NULL
);
CREATE INDEX idempotency_resolutions_record ON idempotency_resolutions (tenant_id, operation, key_hash);

-- +goose Down
DROP TABLE idempotency_resolutions;
