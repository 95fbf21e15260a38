-- +goose Up
-- The demo's ledger: one entry per payment.succeeded event, written by the
-- ledger consumer in the same transaction as its inbox row (framework
-- inbox_messages), so a redelivered event adds nothing. The IDs (le_ + a
-- time-ordered UUID) order the entries newest first for pagination.
CREATE TABLE ledger_entries (
    tenant_id  TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    payment_id TEXT        NOT NULL,
    amount     BIGINT      NOT NULL,
    currency   TEXT        NOT NULL,
    -- the outbox event this entry was made from
    event_id   TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX ledger_entries_payment ON ledger_entries (tenant_id, payment_id);

-- +goose Down
DROP TABLE ledger_entries;
