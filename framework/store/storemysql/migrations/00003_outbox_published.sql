-- +goose NO TRANSACTION
-- +goose Up
-- Published outbox events the relay keeps (outbox.Config.Retention > 0)
-- move here in the transaction that settles their batch. On PostgreSQL and
-- SQLite this migration also moved the published rows out of
-- outbox_events; the MySQL outbox_events never had them (00002). Safe to
-- re-run (see 00001).
CREATE TABLE IF NOT EXISTS outbox_published (
    position       BIGINT       NOT NULL PRIMARY KEY,
    id             UUID         NOT NULL,
    tenant_id      VARCHAR(255) NOT NULL,
    type           VARCHAR(255) NOT NULL,
    aggregate_type VARCHAR(255) NOT NULL,
    aggregate_id   VARCHAR(255) NOT NULL,
    seq            BIGINT       NOT NULL,
    payload        MEDIUMTEXT   NOT NULL,
    headers        TEXT         NOT NULL,
    created_at     DATETIME(6)  NOT NULL,
    attempts       INTEGER      NOT NULL,
    published_at   DATETIME(6)  NOT NULL,
    -- Retention deletes published events in batches by published_at.
    INDEX outbox_published_published_at (published_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS outbox_published;
