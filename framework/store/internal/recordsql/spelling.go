package recordsql

import (
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Spelling is every spelling of the record SQL that differs between
// databases: the database clock and a time a duration from it, the next
// fence token, and an age in seconds; whether the hot statements run
// numbered; and the statements a database writes otherwise. Everything
// else (ON CONFLICT … DO UPDATE … WHERE … RETURNING, row values) is
// written once, in this package's templates.
type Spelling struct {
	// Clock spells the database clock moved ahead by the durations named
	// (each a named argument, spelled with Duration), in this order; with
	// none, the database clock itself. Every time a statement reads or
	// sets is Clock's.
	Clock func(shifts ...string) string
	// NextFence hands out the next fence token.
	NextFence string
	// AgeSeconds is the age in seconds of the time expression {time} on
	// the clock {now}.
	AgeSeconds string
	// Duration spells a duration as the named arguments of Clock.
	Duration func(time.Duration) string
	// Numbered: the hot read (get) runs with numbered placeholders, with
	// no gorm statement built (PostgreSQL; SQLite, which takes $n too).
	Numbered bool
	// Positional: the hot read (get) runs with positional placeholders
	// (?, one an occurrence of a name), with no gorm statement built (the
	// MySQL family, which has no numbered ones).
	Positional bool
	// Rows, when set, runs the numbered or positional read (get) on the
	// pool ([store.QueryRow]).
	Rows store.RowQuerier
	// Integer is the type of an integer CAST. Defaults to "INTEGER".
	Integer string
	// DrawFence, when set, is the query that draws a fence token before a
	// reclaim or a takeover, whose statements (in Statements) take it as
	// @new_fence: where the database has no UPDATE … RETURNING to report
	// what a conditional write did (MySQL), the drawn token tells. The
	// takeover then runs as an UPDATE whose rows affected tell, and the
	// statement "taken_over" reads the row it wrote (… RETURNING fence,
	// attempt … WHERE fence = @new_fence).
	DrawFence string
	// Statements replace the templates of the same name ("insert",
	// "reclaim", "takeover", …) and add "taken_over". They use the
	// templates' placeholders ({now}, {lease}, {ttl}, {next_fence},
	// {int}) and named arguments, and may build on [ClaimColumns] and
	// [KeyWhere].
	Statements map[string]string
	// Bind, when set, adds to the arguments of every statement the ones
	// that Clock names beyond the statement's own: the framework's tests
	// move the clock this way (storetest.ShiftRecordClock, through
	// [Respellable]). The drivers set none: their statements read the
	// database clock as it is.
	Bind func(args map[string]any)
}

// Respellable is the accessor every driver implements so that the
// framework's tests can run its record statements in another spelling,
// the database clock moved ahead (storetest.ShiftRecordClock). Its types
// are internal: an application can neither implement it nor call it with
// anything but nil, which changes nothing.
type Respellable interface {
	// WithRecordSpelling returns the driver with the records of
	// edit(its spelling) and nothing else changed (the driver itself when
	// edit is nil).
	WithRecordSpelling(edit func(Spelling) Spelling) store.Driver
}

// recordColumns are the columns of a record as the reading statements
// return them, in [recordRow]'s order.
const recordColumns = `tenant_id, operation, idem_key, fingerprint, fingerprint_version, state, recovery_point,
    attempt, fence, locked_until, response_status, response_headers, response_body, response_truncated,
    resource_ref, error_code, created_at, updated_at, expires_at`

// ClaimColumns are the columns a claim sets; the response columns keep
// their defaults (NULL, FALSE).
const ClaimColumns = `tenant_id, operation, idem_key, fingerprint, fingerprint_version, state, recovery_point,
    attempt, fence, locked_until, created_at, updated_at, expires_at`

// KeyWhere selects the record of the statement's key.
const KeyWhere = "tenant_id = @tenant AND operation = @operation AND idem_key = @key"

// liveAttempt is the fence of every write of an attempt: its token is the
// record's and its lease is live on the database clock.
const liveAttempt = KeyWhere + " AND fence = @fence AND state = 'in_progress' AND locked_until > {now}"

// templates are the record statements, written once. The placeholders in
// braces are the [Spelling]'s; the named arguments (@tenant, …) are the
// statement's.
var templates = map[string]string{
	// INSERT … SELECT … WHERE NOT EXISTS: a key that is held (the replay
	// path) draws no fence and attempts no insert; ON CONFLICT DO NOTHING
	// covers a concurrent insert of the same key.
	"insert": `INSERT INTO idempotency_records (` + ClaimColumns + `)
SELECT @tenant, @operation, @key, @fingerprint, CAST(@version AS {int}), 'in_progress', @point, 1,
    {next_fence}, {lease}, {now}, {now}, {ttl}
WHERE NOT EXISTS (SELECT 1 FROM idempotency_records WHERE ` + KeyWhere + `)
ON CONFLICT (tenant_id, operation, idem_key) DO NOTHING
RETURNING fence, attempt`,
	"reclaim": `INSERT INTO idempotency_records (` + ClaimColumns + `)
VALUES (@tenant, @operation, @key, @fingerprint, CAST(@version AS {int}), 'in_progress', @point, 1,
    {next_fence}, {lease}, {now}, {now}, {ttl})
ON CONFLICT (tenant_id, operation, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    fingerprint_version = excluded.fingerprint_version,
    state = 'in_progress',
    recovery_point = excluded.recovery_point,
    attempt = idempotency_records.attempt + 1,
    fence = excluded.fence,
    locked_until = excluded.locked_until,
    response_status = NULL,
    response_headers = NULL,
    response_body = NULL,
    response_truncated = FALSE,
    resource_ref = NULL,
    error_code = NULL,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at,
    expires_at = excluded.expires_at
WHERE idempotency_records.state = 'completed' AND idempotency_records.expires_at <= {now}
RETURNING fence, attempt`,
	// The hot read (every POST replay) returns the database clock beside
	// the row, and the record's expiry and lease are judged on it in Go
	// (recordRow.judgeAt), as the CASEs of "list" judge them in SQL: the
	// same comparisons of the same database times, in a statement that
	// SQLite, which compiles every statement at every run, compiles in a
	// fraction of the time.
	"get": `SELECT ` + recordColumns + `, {now} AS db_now
FROM idempotency_records WHERE ` + KeyWhere,
	"takeover": `UPDATE idempotency_records
SET state = 'in_progress', attempt = attempt + 1, fence = {next_fence}, locked_until = {lease}, updated_at = {now}
WHERE ` + KeyWhere + ` AND fence = @fence AND state = @from AND (state = 'unknown' OR locked_until <= {now})
RETURNING fence, attempt`,
	"advance": `UPDATE idempotency_records
SET recovery_point = @point, resource_ref = COALESCE(@ref, resource_ref), locked_until = {lease}, updated_at = {now}
WHERE ` + liveAttempt,
	"renew": `UPDATE idempotency_records SET locked_until = {lease}, updated_at = {now}
WHERE ` + liveAttempt,
	"complete": `UPDATE idempotency_records
SET state = 'completed', locked_until = NULL, response_status = @status, response_headers = @headers,
    response_body = @body, response_truncated = @truncated, resource_ref = COALESCE(@ref, resource_ref),
    recovery_point = COALESCE(@point, recovery_point), error_code = @code, updated_at = {now}, expires_at = {ttl}
WHERE ` + liveAttempt,
	"unknown": `UPDATE idempotency_records SET state = 'unknown', locked_until = NULL, error_code = @code, updated_at = {now}
WHERE ` + liveAttempt,
	"release": `DELETE FROM idempotency_records WHERE ` + liveAttempt + ` AND recovery_point = @point`,
	"unfinished": `SELECT ` + recordColumns + `, 0 AS expired,
    CASE WHEN state = 'in_progress' THEN 1 ELSE 0 END AS lease_expired
FROM idempotency_records
WHERE (state = 'in_progress' AND locked_until <= {now}) OR state = 'unknown'
ORDER BY updated_at LIMIT @limit`,
	// The batch is a derived table inside IN, which MySQL accepts where it
	// refuses LIMIT in an IN subquery.
	"delete_expired": `DELETE FROM idempotency_records
WHERE state = 'completed' AND expires_at <= {now} AND (tenant_id, operation, idem_key) IN (
    SELECT tenant_id, operation, idem_key FROM (SELECT tenant_id, operation, idem_key FROM idempotency_records
    WHERE state = 'completed' AND expires_at <= {now}
    ORDER BY expires_at LIMIT @limit) batch)`,
	"list": `SELECT ` + recordColumns + `,
    CASE WHEN state = 'completed' AND expires_at <= {now} THEN 1 ELSE 0 END AS expired,
    CASE WHEN locked_until IS NOT NULL AND locked_until <= {now} THEN 1 ELSE 0 END AS lease_expired
FROM idempotency_records
WHERE (@tenant = '' OR tenant_id = @tenant) AND (@operation = '' OR operation = @operation)
    AND (@state = '' OR state = @state) AND created_at <= {older}
ORDER BY created_at, tenant_id, operation, idem_key LIMIT @limit`,
	"count_expired": `SELECT count(*) FROM idempotency_records WHERE state = 'completed' AND expires_at <= {now}`,
	"audit": `INSERT INTO idempotency_resolutions (tenant_id, operation, key_hash, fence, from_state, outcome, status,
    reference, error_code, actor, reason, resolved_at)
VALUES (@tenant, @operation, @key_hash, @fence, @from, @outcome, @status, @ref, @code, @actor, @reason, {now})`,
	"stats": `SELECT
    (SELECT {age_of_oldest} FROM idempotency_records WHERE state = 'in_progress') AS oldest_seconds,
    (SELECT count(*) FROM idempotency_records WHERE state = 'unknown') AS unknown`,
	"put_operation": `INSERT INTO idempotency_operations (operation, codes, updated_at) VALUES (@operation, @codes, {now})
ON CONFLICT (operation) DO UPDATE SET codes = excluded.codes, updated_at = excluded.updated_at`,
	"get_operation": `SELECT operation, codes, updated_at FROM idempotency_operations WHERE operation = @operation`,
}
