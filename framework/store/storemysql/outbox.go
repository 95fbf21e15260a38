package storemysql

import (
	"context"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/outboxsql"
)

// Outbox returns the outbox's statements on the MySQL family: the shared
// ones, with a claim that locks its rows FOR UPDATE SKIP LOCKED, so that
// several relays run at once, and no vacuum.
func (Driver) Outbox() store.Outbox { return outbox{} }

// outbox is [store.Outbox] on the MySQL family.
type outbox struct{ outboxsql.Statements }

var _ store.Outbox = outbox{}

// claimSQL locks the claimed rows, skipping those another relay holds
// (MariaDB 10.6+ takes the locks of the claimed CTE's rows).
const claimSQL = outboxsql.ClaimHead + "FOR UPDATE SKIP LOCKED" + outboxsql.ClaimTail

// ClaimLocks is true: the claim's transaction holds its rows' locks until
// the batch is settled, as on PostgreSQL.
func (outbox) ClaimLocks() bool { return true }

// Claim claims the batch on tx, the relay's write transaction.
func (outbox) Claim(ctx context.Context, tx *gorm.DB, p store.OutboxClaimParams) ([]store.OutboxEventRow, error) {
	return outboxsql.Claim(ctx, tx, claimSQL, p)
}

// Vacuum does nothing: InnoDB purges deleted rows itself.
func (outbox) Vacuum(context.Context, *gorm.DB) error { return nil }
