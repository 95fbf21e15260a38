package storemysql

import (
	"context"
	"database/sql"
	"time"
)

// Test access to the transaction and the error reading.

type Tx = tx

func Begin(ctx context.Context, conn *sql.Conn, lockTimeout, statementTimeout time.Duration) (*Tx, error) {
	return begin(ctx, conn, lockTimeout, statementTimeout)
}

type BatchTx = batchTx

func BeginBatch(conn *sql.Conn, lockTimeout, statementTimeout time.Duration) *BatchTx {
	return beginBatch(conn, lockTimeout, statementTimeout)
}

type Kind = errorKind

const (
	OtherError      = otherError
	LockTimeout     = lockTimeout
	Deadlock        = deadlock
	Unavailable     = unavailable
	UniqueViolation = uniqueViolation
	UnstorableText  = unstorableText
)

func KindOf(err error) Kind { return kindOf(err) }

func CheckVersion(v string) error { return checkVersion(v) }

const (
	LockSQL = lockSQL
	ReadSQL = readSQL
)
