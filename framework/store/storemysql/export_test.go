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

func (t *tx) Finish(ctx context.Context) error { return t.finish(ctx) }
func (t *tx) Abort(ctx context.Context)        { t.abort(ctx) }

type Kind = errorKind

const (
	OtherError      = otherError
	LockTimeout     = lockTimeout
	Unavailable     = unavailable
	UniqueViolation = uniqueViolation
	UnstorableText  = unstorableText
)

func KindOf(err error) Kind { return kindOf(err) }
