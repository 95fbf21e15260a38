-- +goose Up
-- Published outbox events leave outbox_events: the relay deletes each one
-- in the transaction that settles its batch, or, when the relay keeps them
-- (outbox.Config.Retention > 0), moves it here. outbox_events then holds
-- pending and parked events only, and the partial indexes that kept the
-- relay's claim off published rows are no longer needed: every event
-- written saves their two index entries, and a publish deletes a row
-- instead of rewriting it and all its index entries.
-- A process of an earlier version still running after this migration
-- relays nothing (its claim names published_at, and fails); the new
-- processes publish its events. Its requests are unaffected on PostgreSQL.
CREATE TABLE outbox_published (
    position       INTEGER     PRIMARY KEY,
    id             TEXT        NOT NULL,
    tenant_id      TEXT        NOT NULL,
    type           TEXT        NOT NULL,
    aggregate_type TEXT        NOT NULL,
    aggregate_id   TEXT        NOT NULL,
    seq            BIGINT      NOT NULL,
    payload        TEXT        NOT NULL,
    headers        TEXT        NOT NULL,
    created_at     DATETIME    NOT NULL,
    attempts       INTEGER     NOT NULL,
    published_at   DATETIME    NOT NULL
);
-- Retention deletes published events in batches by published_at.
CREATE INDEX outbox_published_published_at ON outbox_published (published_at);
INSERT INTO outbox_published (position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, published_at)
SELECT position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, published_at
FROM outbox_events WHERE published_at IS NOT NULL;
DELETE FROM outbox_events WHERE published_at IS NOT NULL;
DROP INDEX outbox_events_pending;
DROP INDEX outbox_events_aggregate_pending;
DROP INDEX outbox_events_published;
ALTER TABLE outbox_events DROP COLUMN published_at;

-- +goose Down
ALTER TABLE outbox_events ADD COLUMN published_at DATETIME   ;
INSERT INTO outbox_events (position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, available_at, published_at)
SELECT position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, published_at, published_at
FROM outbox_published;
CREATE INDEX outbox_events_pending ON outbox_events (position)
    WHERE published_at IS NULL AND parked_at IS NULL;
CREATE INDEX outbox_events_aggregate_pending ON outbox_events (tenant_id, aggregate_type, aggregate_id, seq)
    WHERE published_at IS NULL AND parked_at IS NULL;
CREATE INDEX outbox_events_published ON outbox_events (published_at)
    WHERE published_at IS NOT NULL;
DROP TABLE outbox_published;
