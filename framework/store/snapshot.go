package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// ErrNoSnapshot is returned by [ReadSnapshot] when db cannot read in one
// round trip: it is a transaction already (whose own reads see what it
// wrote), or its dialect is not PostgreSQL. The caller reads the ordinary
// way.
var ErrNoSnapshot = errors.New("store: no one-round-trip snapshot on this handle")

// ReadSnapshot runs queries that must see one state of the database (a row
// and its child rows, say) on PostgreSQL in one round trip: BEGIN ISOLATION
// LEVEL REPEATABLE READ READ ONLY, the queries and COMMIT go out as one
// pgx batch, and each result is scanned by gorm into its query's
// destination. Each query is built by a function that receives a dry-run
// session of db and returns it with one query (Find, Take, First) built
// on it, for example
//
//	store.ReadSnapshot(ctx, db,
//		func(q *gorm.DB) *gorm.DB { return q.Table("orders").Where("id = ?", id).Take(&order) },
//		func(q *gorm.DB) *gorm.DB { return q.Table("order_items").Where("order_id = ?", id).Find(&order.Items) })
//
// It returns, per query, its result: RowsAffected and Error as gorm sets
// them (gorm.ErrRecordNotFound for an empty Take). Its own error is a
// failure of the round trip, or [ErrNoSnapshot] when db is not a
// PostgreSQL pool.
func ReadSnapshot(ctx context.Context, db *gorm.DB, queries ...func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
	if !CanReadSnapshot(db) {
		return nil, ErrNoSnapshot
	}
	pool := db.Statement.ConnPool.(*sql.DB)
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
	conn, err := pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return fmt.Errorf("%w: the PostgreSQL driver connection %T is not pgx", ErrMisconfigured, dc)
		}
		br := pc.Conn().SendBatch(ctx, b)
		err := readSnapshot(br, built)
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

// CanReadSnapshot reports whether [ReadSnapshot] can read on db: a
// PostgreSQL pool, not a transaction.
func CanReadSnapshot(db *gorm.DB) bool {
	_, pool := db.Statement.ConnPool.(*sql.DB)
	return pool && db.Dialector.Name() == "postgres"
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
