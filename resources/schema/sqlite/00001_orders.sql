-- +goose Up
-- Orders: a resource of the PUT engine. Every engine table has this shape:
-- the (tenant_id, id) primary key is the concurrency control of creation.
CREATE TABLE orders (
    tenant_id          TEXT     NOT NULL,
    id                 TEXT     NOT NULL,
    version            INTEGER  NOT NULL,
    status             TEXT     NOT NULL,
    body               TEXT     NOT NULL,
    create_fingerprint TEXT     NOT NULL,
    fingerprint        TEXT     NOT NULL,
    created_at         DATETIME NOT NULL,
    updated_at         DATETIME NOT NULL,
    deleted_at         DATETIME,
    PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;

-- The outbox/audit of order creation, written in the insert's transaction.
CREATE TABLE order_events (
    seq        INTEGER  PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT     NOT NULL,
    order_id   TEXT     NOT NULL,
    type       TEXT     NOT NULL,
    payload    TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);
CREATE INDEX order_events_order ON order_events (tenant_id, order_id);

-- +goose Down
DROP TABLE order_events;
DROP TABLE orders;
