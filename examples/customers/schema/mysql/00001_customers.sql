-- +goose NO TRANSACTION
-- +goose Up
-- A resource table of the PUT engine on the MySQL family: the system
-- columns of framework.System, the (tenant_id, id) primary key, the list
-- and status indexes, then the resource's own columns and indexes. Safe to
-- re-run (one statement). The ID is its UUID's canonical lower-case text
-- (the CHECK keeps it the only spelling); indexed text is VARCHAR(255).
CREATE TABLE IF NOT EXISTS customers (
    tenant_id          VARCHAR(255) NOT NULL,
    id                 CHAR(36)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL
                       CHECK (id REGEXP '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
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
