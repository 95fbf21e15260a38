-- +goose NO TRANSACTION
-- +goose Up
-- The transactional outbox (framework/outbox) and the consumer inbox
-- (framework/inbox). Every statement is safe to re-run (see 00001).
--
-- outbox_events starts in the shape PostgreSQL reaches with its 00003:
-- without published_at, for a published event leaves the table (to
-- outbox_published, 00003, or nowhere). No MySQL outbox ever held
-- published rows, so there is nothing to move.
CREATE TABLE IF NOT EXISTS outbox_events (
    -- position orders events globally; the relay claims oldest first.
    position       BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    -- MariaDB's UUID type (10.7+): 16 bytes stored, the canonical text
    -- read and written, any spelling of one UUID the same value
    id             UUID         NOT NULL UNIQUE,
    tenant_id      VARCHAR(255) NOT NULL,
    type           VARCHAR(255) NOT NULL,
    aggregate_type VARCHAR(255) NOT NULL,
    aggregate_id   VARCHAR(255) NOT NULL,
    -- seq is 1, 2, 3, … per aggregate, from outbox_sequences.
    seq            BIGINT       NOT NULL,
    payload        MEDIUMTEXT   NOT NULL,
    -- propagation headers (W3C trace context) of the writing request, JSON
    headers        TEXT         NOT NULL,
    created_at     DATETIME(6)  NOT NULL,
    -- refusals by the publisher so far; at the relay's limit the event is
    -- parked (parked_at set) and skipped from then on
    attempts       INTEGER      NOT NULL DEFAULT 0,
    available_at   DATETIME(6)  NOT NULL,
    last_error     TEXT,
    parked_at      DATETIME(6),
    CONSTRAINT outbox_events_aggregate_seq UNIQUE (tenant_id, aggregate_type, aggregate_id, seq),
    INDEX outbox_events_parked (parked_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The last sequence number given to each aggregate. Writers increment it
-- with one upsert in their transaction; the row lock it takes orders two
-- transactions that emit for one aggregate, so seq order is commit order.
CREATE TABLE IF NOT EXISTS outbox_sequences (
    tenant_id      VARCHAR(255) NOT NULL,
    aggregate_type VARCHAR(255) NOT NULL,
    aggregate_id   VARCHAR(255) NOT NULL,
    last_seq       BIGINT       NOT NULL,
    PRIMARY KEY (tenant_id, aggregate_type, aggregate_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- One row per message a consumer applied, written in the same transaction
-- as its effect. The primary key is the deduplication.
CREATE TABLE IF NOT EXISTS inbox_messages (
    consumer    VARCHAR(255) NOT NULL,
    message_id  VARCHAR(255) NOT NULL,
    received_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (consumer, message_id),
    INDEX inbox_messages_received (received_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS inbox_messages;
DROP TABLE IF EXISTS outbox_sequences;
DROP TABLE IF EXISTS outbox_events;
