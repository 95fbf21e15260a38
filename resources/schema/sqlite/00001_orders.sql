-- +goose Up
-- Orders: a resource of the PUT engine, the template of any resource table.
-- The system columns (framework.System) come first; the (tenant_id, id)
-- primary key is the concurrency control of creation; the list index serves
-- newest-first pages, and every list filter has an index led by tenant_id.
CREATE TABLE orders (
    tenant_id          TEXT     NOT NULL,
    id                 TEXT     NOT NULL,
    version            INTEGER  NOT NULL,
    status             TEXT     NOT NULL,
    create_fingerprint TEXT     NOT NULL,
    fingerprint        TEXT     NOT NULL,
    created_at         DATETIME NOT NULL,
    updated_at         DATETIME NOT NULL,
    deleted_at         DATETIME,
    customer           TEXT     NOT NULL,
    currency           TEXT     NOT NULL,
    note               TEXT     NOT NULL,
    total_cents        INTEGER  NOT NULL,
    PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;
CREATE INDEX idx_orders_list ON orders (tenant_id, created_at, id);
CREATE INDEX idx_orders_status ON orders (tenant_id, status, created_at, id);
CREATE INDEX idx_orders_customer ON orders (tenant_id, customer, created_at, id);

-- The lines of an order, written and replaced with it.
CREATE TABLE order_items (
    tenant_id        TEXT    NOT NULL,
    order_id         TEXT    NOT NULL,
    position         INTEGER NOT NULL,
    sku              TEXT    NOT NULL,
    quantity         INTEGER NOT NULL,
    unit_price_cents INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, order_id, position),
    FOREIGN KEY (tenant_id, order_id) REFERENCES orders (tenant_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

-- Order events (order.created, order.replaced, order.submitted) go to the
-- framework's outbox_events table, in the transaction of the change.

-- +goose Down
DROP TABLE order_items;
DROP TABLE orders;
