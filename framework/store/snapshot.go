package store

import (
	"context"
	"database/sql"
	"errors"

	"gorm.io/gorm"
)

// ErrNoSnapshot is returned by [ReadSnapshot] when db is a transaction
// already (whose own reads see what it wrote): the caller reads the
// ordinary way.
var ErrNoSnapshot = errors.New("store: no snapshot read on a transaction")

// ReadSnapshot runs queries that must see one state of the database (a row
// and its child rows, say) in one snapshot, and scans each into its
// destination. The driver decides how ([Driver.ReadSnapshot]): on
// PostgreSQL they travel in one round trip (BEGIN ISOLATION LEVEL
// REPEATABLE READ READ ONLY, the queries and COMMIT as one pgx batch), on
// SQLite they run in one read transaction on one connection (WAL gives it
// a snapshot). Each query is built by a function that receives a session
// of db and returns it with one query (Find, Take, First) on it, for
// example
//
//	store.ReadSnapshot(ctx, db,
//		func(q *gorm.DB) *gorm.DB { return q.Table("orders").Where("id = ?", id).Take(&order) },
//		func(q *gorm.DB) *gorm.DB { return q.Table("order_items").Where("order_id = ?", id).Find(&order.Items) })
//
// It returns, per query, its result: RowsAffected and Error as gorm sets
// them (gorm.ErrRecordNotFound for an empty Take). Its own error is a
// failure of the read, or [ErrNoSnapshot] when db is a transaction.
func ReadSnapshot(ctx context.Context, d Driver, db *gorm.DB, queries ...func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
	if !CanReadSnapshot(db) {
		return nil, ErrNoSnapshot
	}
	pool := db.Statement.ConnPool.(*sql.DB)
	conn, err := pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return d.ReadSnapshot(ctx, db, conn, queries)
}

// CanReadSnapshot reports whether [ReadSnapshot] can read on db: a pool,
// not a transaction.
func CanReadSnapshot(db *gorm.DB) bool {
	_, pool := db.Statement.ConnPool.(*sql.DB)
	return pool
}
