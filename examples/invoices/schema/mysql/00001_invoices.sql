-- +goose NO TRANSACTION
-- +goose Up
-- The invoices example on the MySQL family (see postgres/). Each statement
-- is safe to re-run after a crash half-way (DDL is not transactional).
CREATE TABLE IF NOT EXISTS invoices (
    tenant_id      VARCHAR(255) NOT NULL,
    id             VARCHAR(255) NOT NULL,
    customer       TEXT         NOT NULL,
    amount         BIGINT       NOT NULL,
    currency       TEXT         NOT NULL,
    status         TEXT         NOT NULL,
    downstream_key TEXT         NOT NULL,
    billing_id     TEXT,
    created_at     DATETIME(6)  NOT NULL,
    updated_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS invoice_emails (
    tenant_id      VARCHAR(255) NOT NULL,
    id             VARCHAR(255) NOT NULL,
    invoice_id     VARCHAR(255) NOT NULL,
    recipient      TEXT         NOT NULL,
    status         TEXT         NOT NULL,
    downstream_key TEXT         NOT NULL,
    billing_id     TEXT,
    created_at     DATETIME(6)  NOT NULL,
    updated_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, invoice_id) REFERENCES invoices (tenant_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS billing_records (
    tenant_id      VARCHAR(255) NOT NULL,
    downstream_key VARCHAR(255) NOT NULL,
    id             VARCHAR(255) NOT NULL UNIQUE,
    kind           TEXT         NOT NULL,
    request        TEXT         NOT NULL,
    created_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, downstream_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS billing_records;
DROP TABLE IF EXISTS invoice_emails;
DROP TABLE IF EXISTS invoices;
