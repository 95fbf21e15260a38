package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// ErrNoSnapshot is returned by [ReadSnapshot] when db is a transaction
// already (whose own reads see what it wrote): the caller reads the
// ordinary way.
var ErrNoSnapshot = errors.New("store: no snapshot read on a transaction")

// ReadSnapshot runs queries that must see one state of the database (a row
// and its child rows, say) in one snapshot, and scans each into its
// destination. On PostgreSQL they travel in one round trip: BEGIN
// ISOLATION LEVEL REPEATABLE READ READ ONLY, the queries and COMMIT go out
// as one pgx batch, and each result is scanned by gorm. On SQLite they run
// in one read transaction on one connection (WAL gives it a snapshot).
// Each query is built by a function that receives a session of db and
// returns it with one query (Find, Take, First) on it, for example
//
//	store.ReadSnapshot(ctx, db,
//		func(q *gorm.DB) *gorm.DB { return q.Table("orders").Where("id = ?", id).Take(&order) },
//		func(q *gorm.DB) *gorm.DB { return q.Table("order_items").Where("order_id = ?", id).Find(&order.Items) })
//
// It returns, per query, its result: RowsAffected and Error as gorm sets
// them (gorm.ErrRecordNotFound for an empty Take). Its own error is a
// failure of the read, or [ErrNoSnapshot] when db is a transaction.
func ReadSnapshot(ctx context.Context, db *gorm.DB, queries ...func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
	if !CanReadSnapshot(db) {
		return nil, ErrNoSnapshot
	}
	pool := db.Statement.ConnPool.(*sql.DB)
	conn, err := pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if db.Dialector.Name() != "postgres" {
		return readInTransaction(ctx, db, conn, queries)
	}
	built := make([]*gorm.DB, len(queries))
	items := []queued{{sql: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}}
	for i, q := range queries {
		built[i] = q(db.Session(&gorm.Session{DryRun: true, Context: ctx}))
		if built[i].Error != nil {
			return nil, built[i].Error
		}
		items = append(items, queued{sql: built[i].Statement.SQL.String(), args: built[i].Statement.Vars})
	}
	b := batchOf(append(items, queued{sql: "COMMIT"}))
	err = conn.Raw(func(dc any) error {
		c, err := pgxConn(dc)
		if err != nil {
			return err
		}
		br := c.SendBatch(ctx, b)
		err = readSnapshot(br, built)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return built, nil
}

// readInTransaction runs the queries on conn in one read transaction
// (SQLite: BEGIN, which in WAL mode reads one snapshot from its first
// SELECT to its end) and ends it with ROLLBACK: nothing was written. A
// connection that cannot end it is not returned to the pool.
func readInTransaction(ctx context.Context, db *gorm.DB, conn *sql.Conn, queries []func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	built := make([]*gorm.DB, len(queries))
	for i, q := range queries {
		s := db.Session(&gorm.Session{NewDB: true, Context: ctx})
		s.Statement.ConnPool = conn
		built[i] = q(s)
		if err := built[i].Error; err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, err
		}
	}
	return built, ctx.Err()
}

// CanReadSnapshot reports whether [ReadSnapshot] can read on db: a pool,
// not a transaction.
func CanReadSnapshot(db *gorm.DB) bool {
	_, pool := db.Statement.ConnPool.(*sql.DB)
	return pool
}

func readSnapshot(br pgx.BatchResults, built []*gorm.DB) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	for _, q := range built {
		q.Error = nil
		if err := scanInto(br, q); err != nil {
			return err
		}
	}
	_, err := br.Exec()
	return err
}

// gormRows shows pgx rows to gorm.Scan. Scanning into a struct, the only
// use here, does not ask for column types.
type gormRows struct{ pgx.Rows }

func (r gormRows) Columns() ([]string, error) {
	fds := r.FieldDescriptions()
	names := make([]string, len(fds))
	for i, fd := range fds {
		names[i] = fd.Name
	}
	return names, nil
}

func (gormRows) ColumnTypes() ([]*sql.ColumnType, error) {
	return nil, errors.New("store: column types are not available on a snapshot read")
}

func (r gormRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}
