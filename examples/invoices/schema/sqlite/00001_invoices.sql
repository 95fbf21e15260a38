-- +goose Up
-- The service's invoices. The ID is this service's (inv_…); billing_id is
-- the one the billing service assigned when it issued the invoice, NULL
-- while the invoice is pending. downstream_key is the key of that call.
CREATE TABLE invoices (
    tenant_id      TEXT        NOT NULL,
    id             TEXT        NOT NULL,
    customer       TEXT        NOT NULL,
    amount         INTEGER     NOT NULL,
    currency       TEXT        NOT NULL,
    status         TEXT        NOT NULL,
    downstream_key TEXT        NOT NULL,
    billing_id     TEXT,
    created_at     DATETIME    NOT NULL,
    updated_at     DATETIME    NOT NULL,
    PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;

-- One row per email of an invoice, sent through the billing service.
CREATE TABLE invoice_emails (
    tenant_id      TEXT        NOT NULL,
    id             TEXT        NOT NULL,
    invoice_id     TEXT        NOT NULL,
    recipient      TEXT        NOT NULL,
    status         TEXT        NOT NULL,
    downstream_key TEXT        NOT NULL,
    billing_id     TEXT,
    created_at     DATETIME    NOT NULL,
    updated_at     DATETIME    NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, invoice_id) REFERENCES invoices (tenant_id, id)
) WITHOUT ROWID;

-- The third party's own records (in a real service they live at the
-- billing service): one per downstream key.
CREATE TABLE billing_records (
    tenant_id      TEXT        NOT NULL,
    downstream_key TEXT        NOT NULL,
    id             TEXT        NOT NULL UNIQUE,
    kind           TEXT        NOT NULL,
    request        TEXT        NOT NULL,
    created_at     DATETIME    NOT NULL,
    PRIMARY KEY (tenant_id, downstream_key)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE billing_records;
DROP TABLE invoice_emails;
DROP TABLE invoices;
