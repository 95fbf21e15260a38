-- +goose NO TRANSACTION
-- +goose Up
-- A resource table of the PUT engine on the MySQL family: the system
-- columns of framework.System, the (tenant_id, id) primary key, the list
-- and status indexes, then the resource's own columns and indexes. Safe to
-- re-run (one statement). The ID is MariaDB's UUID type (16 bytes, one
-- value per UUID whatever its spelling); indexed text is VARCHAR(255).
CREATE TABLE IF NOT EXISTS customers (
    tenant_id          VARCHAR(255) NOT NULL,
    id                 UUID         NOT NULL,
    version            BIGINT       NOT NULL,
    status             VARCHAR(255) NOT NULL,
    create_fingerprint TEXT         NOT NULL,
    fingerprint        TEXT         NOT NULL,
    created_at         DATETIME(6)  NOT NULL,
    updated_at         DATETIME(6)  NOT NULL,
    deleted_at         DATETIME(6),
    name               TEXT         NOT NULL,
    email              VARCHAR(255) NOT NULL,
    plan               TEXT         NOT NULL,
    PRIMARY KEY (tenant_id, id),
    INDEX idx_customers_list (tenant_id, created_at, id),
    INDEX idx_customers_status (tenant_id, status, created_at, id),
    UNIQUE INDEX idx_customers_email (tenant_id, email)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS customers;
