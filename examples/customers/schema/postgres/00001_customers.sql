-- +goose Up
-- A resource table of the PUT engine on PostgreSQL: the system columns of
-- framework.System, the (tenant_id, id) primary key, the list and status
-- indexes, then the resource's own columns and indexes (each led by
-- tenant_id, so that tenants never share a value or a scan).
CREATE TABLE customers (
    tenant_id          TEXT        NOT NULL,
    id                 UUID        NOT NULL,
    version            BIGINT      NOT NULL,
    status             TEXT        NOT NULL,
    create_fingerprint TEXT        NOT NULL,
    fingerprint        TEXT        NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    deleted_at         TIMESTAMPTZ,
    name               TEXT        NOT NULL,
    email              TEXT        NOT NULL,
    plan               TEXT        NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX idx_customers_list ON customers (tenant_id, created_at, id);
CREATE INDEX idx_customers_status ON customers (tenant_id, status, created_at, id);
CREATE UNIQUE INDEX idx_customers_email ON customers (tenant_id, email);

-- +goose Down
DROP TABLE customers;
