-- +goose NO TRANSACTION
-- +goose Up
-- The operations of the POST fallback as the services that run them
-- declared them (postkeys.Adapter.PublishOperations), with the problem
-- codes each may answer, as JSON; the operator's command reads it. Safe to
-- re-run (see 00001).
CREATE TABLE IF NOT EXISTS idempotency_operations (
    operation   VARCHAR(255) NOT NULL PRIMARY KEY,
    codes       MEDIUMTEXT   NOT NULL,
    updated_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS idempotency_operations;
