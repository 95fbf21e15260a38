-- +goose Up
-- The transactional outbox (framework/outbox): events written in the same
-- transaction as the effect they report, published by the relay at least
-- once, in order per aggregate.
CREATE TABLE outbox_events (
    -- position orders events globally; the relay claims oldest first.
    position       BIGSERIAL   PRIMARY KEY,
    id             UUID        NOT NULL UNIQUE,
    tenant_id      TEXT        NOT NULL,
    type           TEXT        NOT NULL,
    aggregate_type TEXT        NOT NULL,
    aggregate_id   TEXT        NOT NULL,
    -- seq is 1, 2, 3, … per aggregate, from outbox_sequences.
    seq            BIGINT      NOT NULL,
    payload        TEXT        NOT NULL,
    -- propagation headers (W3C trace context) of the writing request, JSON
    headers        TEXT        NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    -- refusals by the publisher so far; at the relay's limit the event is
    -- parked (parked_at set) and skipped from then on
    attempts       INTEGER     NOT NULL DEFAULT 0,
    available_at   TIMESTAMPTZ NOT NULL,
    last_error     TEXT,
    published_at   TIMESTAMPTZ,
    parked_at      TIMESTAMPTZ,
    CONSTRAINT outbox_events_aggregate_seq UNIQUE (tenant_id, aggregate_type, aggregate_id, seq)
);
-- The relay's claim: pending events oldest first, and the look for an
-- earlier pending event of the same aggregate.
CREATE INDEX outbox_events_pending ON outbox_events (position)
    WHERE published_at IS NULL AND parked_at IS NULL;
CREATE INDEX outbox_events_aggregate_pending ON outbox_events (tenant_id, aggregate_type, aggregate_id, seq)
    WHERE published_at IS NULL AND parked_at IS NULL;
-- Retention deletes published events in batches by published_at.
CREATE INDEX outbox_events_published ON outbox_events (published_at)
    WHERE published_at IS NOT NULL;
CREATE INDEX outbox_events_parked ON outbox_events (parked_at)
    WHERE parked_at IS NOT NULL;

-- The last sequence number given to each aggregate. Writers increment it
-- with one upsert in their transaction; the row lock it takes orders two
-- transactions that emit for one aggregate, so seq order is commit order.
CREATE TABLE outbox_sequences (
    tenant_id      TEXT   NOT NULL,
    aggregate_type TEXT   NOT NULL,
    aggregate_id   TEXT   NOT NULL,
    last_seq       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, aggregate_type, aggregate_id)
);

-- The consumer inbox (framework/inbox): one row per message a consumer
-- applied, written in the same transaction as its effect. The primary key
-- is the deduplication.
CREATE TABLE inbox_messages (
    consumer    TEXT        NOT NULL,
    message_id  TEXT        NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX inbox_messages_received ON inbox_messages (received_at);

-- +goose Down
DROP TABLE inbox_messages;
DROP TABLE outbox_sequences;
DROP TABLE outbox_events;
