-- +goose NO TRANSACTION
-- +goose Up
-- Ledger accounts and transfers of resources/transfers (see postgres/).
-- Safe to re-run (see 00001).
CREATE TABLE IF NOT EXISTS accounts (
    tenant_id  VARCHAR(255) NOT NULL,
    name       VARCHAR(255) NOT NULL,
    currency   TEXT         NOT NULL,
    balance    BIGINT       NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS transfers (
    tenant_id    VARCHAR(255) NOT NULL,
    id           VARCHAR(255) NOT NULL,
    from_account TEXT         NOT NULL,
    to_account   TEXT         NOT NULL,
    amount       BIGINT       NOT NULL,
    currency     TEXT         NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS transfers;
DROP TABLE IF EXISTS accounts;
