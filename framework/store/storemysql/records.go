package storemysql

import (
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/recordsql"
)

// Records returns the idempotency records' SQL on the MySQL family: the
// portable statements in MariaDB's spelling, with the three claims it
// spells otherwise (records, below).
func (Driver) Records() store.Records { return recordsql.New(records, Driver{}.Classify) }

// WithRecordSpelling is the accessor through which the framework's tests
// move the database clock that the records read
// (storetest.ShiftRecordClock; [recordsql.Respellable]): d, with the
// records of edit(their spelling).
func (d Driver) WithRecordSpelling(edit func(recordsql.Spelling) recordsql.Spelling) store.Driver {
	if edit == nil {
		return d
	}
	return respelled{d, recordsql.New(edit(records), d.Classify)}
}

// respelled is a Driver with the records of another spelling: every other
// method is the Driver's.
type respelled struct {
	Driver
	records store.Records
}

func (r respelled) Records() store.Records { return r.records }

var _ recordsql.Respellable = Driver{}

// records is the record SQL of the MySQL family (MariaDB 10.7+), in
// one place. The clock is UTC_TIMESTAMP(6), which no session time zone
// shifts; durations are microseconds. Fences come from a sequence
// (migrations/00001), so they never repeat for a key. MySQL has no
// ON CONFLICT and no UPDATE … RETURNING, so three claims (and the upsert
// of an operation's codes, ON DUPLICATE KEY UPDATE) are spelled otherwise,
// each still one statement against the primary key:
//
//   - insert: INSERT … SELECT … WHERE NOT EXISTS … RETURNING (MariaDB's
//     INSERT … RETURNING); a concurrent insert that commits first makes
//     it fail with a duplicate key, which Insert reads as "held" (InnoDB
//     rolls back that statement alone; the transaction goes on).
//   - reclaim: INSERT … ON DUPLICATE KEY UPDATE whose assignments apply
//     only to an expired completed record, with a token drawn beforehand:
//     the first assignment sets the fence when the record may be
//     reclaimed, and every later one asks "fence = VALUES(fence)" (MySQL
//     evaluates the assignments in order, each seeing the ones before).
//     The row comes back through RETURNING; it was reclaimed when it
//     carries the drawn token.
//   - takeover: the fenced UPDATE with the drawn token, then the row read
//     by that token.
//
// Never INSERT IGNORE: it turns every error of the statement (a value that
// does not fit, a NOT NULL) into a warning and stores what it can.
var records = recordsql.Spelling{
	Clock: func(shifts ...string) string {
		clock := "UTC_TIMESTAMP(6)"
		for _, d := range shifts {
			clock = "(" + clock + " + INTERVAL @" + d + " MICROSECOND)"
		}
		return clock
	},
	NextFence:  "NEXTVAL(idempotency_records_fence_seq)",
	AgeSeconds: "(TIMESTAMPDIFF(MICROSECOND, {time}, {now}) / 1000000.0)",
	Duration:   func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) },
	Integer:    "SIGNED",
	DrawFence:  "SELECT NEXTVAL(idempotency_records_fence_seq)",
	// A replay's read of its record goes straight to the connection, with
	// positional placeholders, with no gorm statement built.
	Positional: true,
	Statements: map[string]string{
		"insert": `INSERT INTO idempotency_records (` + recordsql.ClaimColumns + `)
SELECT @tenant, @operation, @key, @fingerprint, CAST(@version AS SIGNED), 'in_progress', @point, 1,
    {next_fence}, {lease}, {now}, {now}, {ttl}
FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM idempotency_records WHERE ` + recordsql.KeyWhere + `)
RETURNING fence, attempt`,
		"reclaim": `INSERT INTO idempotency_records (` + recordsql.ClaimColumns + `)
VALUES (@tenant, @operation, @key, @fingerprint, CAST(@version AS SIGNED), 'in_progress', @point, 1,
    @new_fence, {lease}, {now}, {now}, {ttl})
ON DUPLICATE KEY UPDATE
    fence = IF(state = 'completed' AND expires_at <= {now}, VALUES(fence), fence),
    fingerprint = IF(fence = VALUES(fence), VALUES(fingerprint), fingerprint),
    fingerprint_version = IF(fence = VALUES(fence), VALUES(fingerprint_version), fingerprint_version),
    recovery_point = IF(fence = VALUES(fence), VALUES(recovery_point), recovery_point),
    attempt = IF(fence = VALUES(fence), attempt + 1, attempt),
    locked_until = IF(fence = VALUES(fence), VALUES(locked_until), locked_until),
    response_status = IF(fence = VALUES(fence), NULL, response_status),
    response_headers = IF(fence = VALUES(fence), NULL, response_headers),
    response_body = IF(fence = VALUES(fence), NULL, response_body),
    response_truncated = IF(fence = VALUES(fence), FALSE, response_truncated),
    resource_ref = IF(fence = VALUES(fence), NULL, resource_ref),
    error_code = IF(fence = VALUES(fence), NULL, error_code),
    created_at = IF(fence = VALUES(fence), VALUES(created_at), created_at),
    updated_at = IF(fence = VALUES(fence), VALUES(updated_at), updated_at),
    state = IF(fence = VALUES(fence), 'in_progress', state),
    expires_at = IF(fence = VALUES(fence), VALUES(expires_at), expires_at)
RETURNING fence, attempt`,
		"takeover": `UPDATE idempotency_records
SET state = 'in_progress', attempt = attempt + 1, fence = @new_fence, locked_until = {lease}, updated_at = {now}
WHERE ` + recordsql.KeyWhere + ` AND fence = @fence AND state = @from AND (state = 'unknown' OR locked_until <= {now})`,
		"taken_over": `SELECT fence, attempt FROM idempotency_records WHERE ` + recordsql.KeyWhere + ` AND fence = @new_fence`,
		"put_operation": `INSERT INTO idempotency_operations (operation, codes, updated_at) VALUES (@operation, @codes, {now})
ON DUPLICATE KEY UPDATE codes = VALUES(codes), updated_at = VALUES(updated_at)`,
	},
}
