-- +goose NO TRANSACTION
-- +goose Up
-- The sandbox payment provider's ledger (see postgres/). The UNIQUE
-- (tenant_id, downstream_key) constraint is the provider's deduplication.
-- Safe to re-run (see 00001).
CREATE TABLE IF NOT EXISTS sandbox_charges (
    tenant_id      VARCHAR(255) NOT NULL,
    id             VARCHAR(255) NOT NULL,
    downstream_key VARCHAR(255) NOT NULL,
    amount         BIGINT       NOT NULL,
    currency       TEXT         NOT NULL,
    customer       TEXT         NOT NULL,
    description    TEXT         NOT NULL,
    payment_method TEXT         NOT NULL,
    status         TEXT         NOT NULL,
    failure_code   TEXT         NOT NULL,
    answered       BOOLEAN      NOT NULL,
    created_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT sandbox_charges_downstream_key UNIQUE (tenant_id, downstream_key),
    INDEX sandbox_charges_created (tenant_id, created_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS sandbox_charges;
