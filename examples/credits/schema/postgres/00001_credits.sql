-- +goose Up
-- Credit balances per tenant and account; a debit never takes one below 0.
CREATE TABLE credit_accounts (
    tenant_id  TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    balance    BIGINT      NOT NULL CHECK (balance >= 0),
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- One row per executed credit or debit; the ID is server-assigned (cr_…).
CREATE TABLE credit_entries (
    tenant_id  TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    account    TEXT        NOT NULL,
    amount     BIGINT      NOT NULL,
    balance    BIGINT      NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

-- +goose Down
DROP TABLE credit_entries;
DROP TABLE credit_accounts;
