package storepg

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// ReadSnapshot sends BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY, the
// queries and COMMIT as one pgx batch on conn (one round trip, one
// snapshot), and scans each result by gorm.
func (Driver) ReadSnapshot(ctx context.Context, db *gorm.DB, conn *sql.Conn, queries []func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
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
	err := conn.Raw(func(dc any) error {
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
	return nil, errors.New("storepg: column types are not available on a snapshot read")
}

func (r gormRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}
