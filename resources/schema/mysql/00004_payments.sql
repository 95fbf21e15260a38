-- +goose NO TRANSACTION
-- +goose Up
-- Payments, the POST fallback's phased example (see postgres/). Safe to
-- re-run (see 00001).
CREATE TABLE IF NOT EXISTS payments (
    tenant_id          VARCHAR(255) NOT NULL,
    id                 VARCHAR(255) NOT NULL,
    amount             BIGINT       NOT NULL,
    currency           TEXT         NOT NULL,
    customer           TEXT         NOT NULL,
    description        TEXT         NOT NULL,
    payment_method     TEXT         NOT NULL,
    status             TEXT         NOT NULL,
    downstream_key     VARCHAR(255) NOT NULL,
    provider_charge_id TEXT,
    failure_code       TEXT,
    created_at         DATETIME(6)  NOT NULL,
    updated_at         DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT payments_downstream_key UNIQUE (tenant_id, downstream_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS payments;
