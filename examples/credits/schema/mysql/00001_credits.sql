-- +goose NO TRANSACTION
-- +goose Up
-- The credits example on the MySQL family (see postgres/). DDL is not
-- transactional on MySQL: each statement is safe to re-run after a crash
-- half-way. Text is utf8mb4 compared byte for byte, times DATETIME(6) UTC.
CREATE TABLE IF NOT EXISTS credit_accounts (
    tenant_id  VARCHAR(255) NOT NULL,
    name       VARCHAR(255) NOT NULL,
    balance    BIGINT       NOT NULL CHECK (balance >= 0),
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS credit_entries (
    tenant_id  VARCHAR(255) NOT NULL,
    id         VARCHAR(255) NOT NULL,
    account    TEXT         NOT NULL,
    amount     BIGINT       NOT NULL,
    balance    BIGINT       NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS credit_entries;
DROP TABLE IF EXISTS credit_accounts;
