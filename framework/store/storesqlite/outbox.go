package storesqlite

import (
	"context"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/outboxsql"
)

// Outbox returns the outbox's statements on SQLite: the shared ones, with
// a claim that locks nothing and no vacuum. Run one relay per database.
func (Driver) Outbox() store.Outbox { return outbox{} }

// outbox is [store.Outbox] on SQLite.
type outbox struct{ outboxsql.Statements }

var _ store.Outbox = outbox{}

// claimSQL is the claim without a locking clause, which SQLite lacks.
const claimSQL = outboxsql.ClaimHead + outboxsql.ClaimTail

// ClaimLocks is false: SQLite has one writer at a time, so a write
// transaction held across a publish would stall every request. The
// claim is a plain read and the relay settles in a short write
// transaction afterwards, which supports one relay per database.
func (outbox) ClaimLocks() bool { return false }

// Claim reads the batch on q, the handle.
func (outbox) Claim(ctx context.Context, q *gorm.DB, p store.OutboxClaimParams) ([]store.OutboxEventRow, error) {
	return outboxsql.Claim(ctx, q, claimSQL, p)
}

// Vacuum does nothing: SQLite reuses a deleted row's space at once.
func (outbox) Vacuum(context.Context, *gorm.DB) error { return nil }
