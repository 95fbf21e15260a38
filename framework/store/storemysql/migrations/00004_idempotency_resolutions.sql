-- +goose NO TRANSACTION
-- +goose Up
-- The audit trail of operators' resolutions (postkeys.Resolve), written in
-- the transaction that completed the record. Rows are kept. Safe to re-run
-- (see 00001).
CREATE TABLE IF NOT EXISTS idempotency_resolutions (
    id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant_id      VARCHAR(255) NOT NULL,
    operation      VARCHAR(255) NOT NULL,
    -- SHA-256 of the idempotency key (hex): the audit trail never holds a
    -- raw key.
    key_hash       CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- the fence of the resolution's takeover
    fence          BIGINT       NOT NULL,
    -- the state the operator found: unknown, or in_progress past its lease
    from_state     VARCHAR(16)  NOT NULL,
    outcome        VARCHAR(16)  NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
    status         INTEGER      NOT NULL,
    reference      TEXT,
    error_code     TEXT,
    actor          TEXT         NOT NULL,
    reason         TEXT         NOT NULL,
    resolved_at    DATETIME(6)  NOT NULL,
    INDEX idempotency_resolutions_record (tenant_id, operation, key_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS idempotency_resolutions;
