-- +goose Up
-- Ledger accounts of resources/transfers, per tenant, created on first use.
-- Balances move only by relative updates (balance = balance + ?).
CREATE TABLE accounts (
    tenant_id  TEXT     NOT NULL,
    name       TEXT     NOT NULL,
    currency   TEXT     NOT NULL,
    balance    INTEGER  NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    PRIMARY KEY (tenant_id, name)
) WITHOUT ROWID;

-- One row per executed transfer; the ID is server-assigned (tr_…).
CREATE TABLE transfers (
    tenant_id    TEXT     NOT NULL,
    id           TEXT     NOT NULL,
    from_account TEXT     NOT NULL,
    to_account   TEXT     NOT NULL,
    amount       INTEGER  NOT NULL,
    currency     TEXT     NOT NULL,
    created_at   DATETIME NOT NULL,
    PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE transfers;
DROP TABLE accounts;
