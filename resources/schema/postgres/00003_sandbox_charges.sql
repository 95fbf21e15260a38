-- +goose Up
-- The sandbox payment provider's ledger. It lives in the API's database so
-- that every process on that database sees one provider and its charges
-- survive restarts. The UNIQUE (tenant_id, downstream_key) constraint is the
-- provider's deduplication: a charge is inserted with ON CONFLICT DO NOTHING
-- and a second call with the same key finds the first charge.
CREATE TABLE sandbox_charges (
    tenant_id      TEXT        NOT NULL,
    id             TEXT        NOT NULL,
    downstream_key TEXT        NOT NULL,
    amount         BIGINT      NOT NULL,
    currency       TEXT        NOT NULL,
    customer       TEXT        NOT NULL,
    description    TEXT        NOT NULL,
    payment_method TEXT        NOT NULL,
    status         TEXT        NOT NULL,
    failure_code   TEXT        NOT NULL,
    -- answered is false while the first answer of a
    -- pm_card_timeout_after_charge charge is still to be lost; the call that
    -- flips it (one UPDATE … WHERE answered = false) loses its answer.
    answered       BOOLEAN     NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT sandbox_charges_downstream_key UNIQUE (tenant_id, downstream_key)
);
CREATE INDEX sandbox_charges_created ON sandbox_charges (tenant_id, created_at, id);

-- +goose Down
DROP TABLE sandbox_charges;
