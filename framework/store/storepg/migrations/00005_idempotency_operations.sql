-- +goose Up
-- The operations of the POST fallback as the services that run them
-- declared them (postkeys.Adapter.PublishOperations, which Adapter.Start
-- calls): one row per operation name, with the problem codes it may
-- answer (its RejectionCodes and Problems) and how each is rendered, as
-- JSON. The operator's command reads it, so that a record is resolved
-- with a code its own operation declared, rendered as the service renders
-- it, and never with another service's code. The last start of a service
-- wins.
CREATE TABLE idempotency_operations (
    operation   TEXT        PRIMARY KEY,
    codes       TEXT        NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE idempotency_operations;
