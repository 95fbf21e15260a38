-- +goose Up
-- Payments: the example resource of the POST fallback in phased mode. A row
-- is written pending in the first phase (with the idempotency record's
-- recovery point), before the provider is called, and completed with the
-- provider's charge ID and the outcome in a later phase.
CREATE TABLE payments (
    tenant_id          TEXT     NOT NULL,
    id                 TEXT     NOT NULL,
    amount             INTEGER  NOT NULL,
    currency           TEXT     NOT NULL,
    customer           TEXT     NOT NULL,
    description        TEXT     NOT NULL,
    payment_method     TEXT     NOT NULL,
    status             TEXT     NOT NULL,
    -- The provider's deduplication key of this payment's charge, derived
    -- from (tenant, operation, idempotency key, step) and this payment's ID.
    downstream_key     TEXT     NOT NULL,
    provider_charge_id TEXT,
    failure_code       TEXT,
    created_at         DATETIME NOT NULL,
    updated_at         DATETIME NOT NULL,
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT payments_downstream_key UNIQUE (tenant_id, downstream_key)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE payments;
