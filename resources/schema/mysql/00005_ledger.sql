-- +goose NO TRANSACTION
-- +goose Up
-- The demo's ledger, one entry per payment.succeeded event (see
-- postgres/). Safe to re-run (see 00001).
CREATE TABLE IF NOT EXISTS ledger_entries (
    tenant_id  VARCHAR(255) NOT NULL,
    id         VARCHAR(255) NOT NULL,
    payment_id VARCHAR(255) NOT NULL,
    amount     BIGINT       NOT NULL,
    currency   TEXT         NOT NULL,
    event_id   TEXT         NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id),
    INDEX ledger_entries_payment (tenant_id, payment_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS ledger_entries;
