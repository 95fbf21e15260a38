-- +goose NO TRANSACTION
-- +goose Up
-- The MySQL family (MariaDB 10.7+) mirrors storepg's migrations. DDL is not
-- transactional there (each statement commits on its own), so a migration
-- that crashed half-way is applied again from its first statement: every
-- statement of every MySQL migration is written to be safe to re-run
-- (IF NOT EXISTS, IF EXISTS). goose records the version only once all of
-- them ran.
--
-- Text is utf8mb4 with a binary collation that does not pad
-- (utf8mb4_nopad_bin): keys compare byte for byte, so 'K' and 'k', or 'k'
-- and 'k ', are two keys, as they are on PostgreSQL. Times are DATETIME(6)
-- in UTC, written and compared on the database clock, UTC_TIMESTAMP(6),
-- which no session time zone shifts. UUIDs are MariaDB's UUID type (10.7+):
-- 16 bytes stored and the canonical text read and written, so that
-- uuid.UUID binds and scans unchanged and one UUID, however spelled, is one
-- value (CHAR(36) would make 'A…' and 'a…' two; BINARY(16) would need
-- every UUID parameter converted).
--
-- Idempotency records of the POST fallback (fallback/postkeys). The primary
-- key is the concurrency control. fence is drawn from a sequence (MariaDB
-- 10.3+), so it never repeats for a key: not after a release, a re-claim,
-- or the janitor's delete.
CREATE SEQUENCE IF NOT EXISTS idempotency_records_fence_seq;
CREATE TABLE IF NOT EXISTS idempotency_records (
    tenant_id           VARCHAR(255) NOT NULL,
    operation           VARCHAR(255) NOT NULL,
    -- wire.MaxKeyLen characters of [A-Za-z0-9._:-]
    idem_key            VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    fingerprint         TEXT         NOT NULL,
    fingerprint_version INTEGER      NOT NULL,
    state               VARCHAR(16)  NOT NULL CHECK (state IN ('in_progress', 'completed', 'unknown')),
    recovery_point      TEXT         NOT NULL,
    attempt             BIGINT       NOT NULL,
    fence               BIGINT       NOT NULL,
    locked_until        DATETIME(6),
    response_status     INTEGER,
    response_headers    MEDIUMTEXT,
    response_body       MEDIUMBLOB,
    -- true when the body was over the cap and is re-rendered from
    -- resource_ref on replay
    response_truncated  BOOLEAN      NOT NULL DEFAULT FALSE,
    resource_ref        TEXT,
    error_code          TEXT,
    created_at          DATETIME(6)  NOT NULL,
    updated_at          DATETIME(6)  NOT NULL,
    expires_at          DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, operation, idem_key),
    -- The janitor deletes expired completed rows in batches by expires_at.
    INDEX idempotency_records_expires_at (expires_at),
    -- The recovery worker and the gauges look at unfinished rows (MySQL
    -- has no partial index: the index holds every row).
    INDEX idempotency_records_unfinished (state, locked_until)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- +goose Down
DROP TABLE IF EXISTS idempotency_records;
DROP SEQUENCE IF EXISTS idempotency_records_fence_seq;
