-- +goose NO TRANSACTION
-- +goose Up
-- Orders on the MySQL family; see 00001_orders.sql of postgres/ for the
-- shape. Every statement is safe to re-run (DDL is not transactional on
-- MySQL: a crash half-way leaves the first tables, and goose runs the
-- migration again). Text is utf8mb4 compared byte for byte
-- (utf8mb4_nopad_bin), indexed text is VARCHAR(255) (MySQL indexes no
-- TEXT in full), times are DATETIME(6) in UTC, and an ID is MariaDB's
-- UUID type: 16 bytes stored, the canonical text read and written, so
-- that 'ABC…' and 'abc…' are one UUID and can never be two rows.
CREATE TABLE IF NOT EXISTS orders (
    tenant_id          VARCHAR(255) NOT NULL,
    id                 UUID         NOT NULL,
    version            BIGINT       NOT NULL,
    status             VARCHAR(255) NOT NULL,
    create_fingerprint TEXT         NOT NULL,
    fingerprint        TEXT         NOT NULL,
    created_at         DATETIME(6)  NOT NULL,
    updated_at         DATETIME(6)  NOT NULL,
    deleted_at         DATETIME(6),
    customer           VARCHAR(255) NOT NULL,
    currency           TEXT         NOT NULL,
    note               TEXT         NOT NULL,
    total_cents        BIGINT       NOT NULL,
    PRIMARY KEY (tenant_id, id),
    INDEX idx_orders_list (tenant_id, created_at, id),
    INDEX idx_orders_status (tenant_id, status, created_at, id),
    INDEX idx_orders_customer (tenant_id, customer, created_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The lines of an order, written and replaced with it.
CREATE TABLE IF NOT EXISTS order_items (
    tenant_id        VARCHAR(255) NOT NULL,
    order_id         UUID         NOT NULL,
    position         INTEGER      NOT NULL,
    sku              TEXT         NOT NULL,
    quantity         BIGINT       NOT NULL,
    unit_price_cents BIGINT       NOT NULL,
    PRIMARY KEY (tenant_id, order_id, position),
    FOREIGN KEY (tenant_id, order_id) REFERENCES orders (tenant_id, id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS order_items;
DROP TABLE IF EXISTS orders;
