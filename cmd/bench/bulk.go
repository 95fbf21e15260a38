package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	_ "github.com/glebarez/go-sqlite" // database/sql driver "sqlite" for the SQLite bulk loads

	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/resources/transfers"
)

// Bulk loads for the scale mode and for settling the tables before the
// rounds: rows go straight into the tables (COPY on PostgreSQL, multi-row
// INSERTs in large transactions on SQLite and MariaDB), never through
// HTTP. Only these functions know the tables' columns.

// bulkDB opens the measured database for bulk loads.
func bulkDB(d *database) (*sql.DB, error) {
	switch d.Dialect {
	case "postgres":
		return sql.Open("pgx", d.DSN)
	case "mysql":
		return storemysql.OpenDB(d.DSN, 10*time.Second)
	}
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(d.DSN, "sqlite:")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// bulkInsert writes n rows of columns into table; row(i) gives row i.
func bulkInsert(ctx context.Context, db *sql.DB, dialect, table string, columns []string, n int, row func(i int) []any) error {
	if n == 0 {
		return nil
	}
	if dialect == "postgres" {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		return conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			i := 0
			src := pgx.CopyFromFunc(func() ([]any, error) {
				if i == n {
					return nil, nil
				}
				i++
				return row(i - 1), nil
			})
			_, err := pc.CopyFrom(ctx, pgx.Identifier{table}, columns, src)
			return err
		})
	}
	const batch = 500
	placeholders := "(" + strings.Repeat("?,", len(columns)-1) + "?)"
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + table + " (" + strings.Join(columns, ",") + ") VALUES ")
		args := make([]any, 0, (end-start)*len(columns))
		for i := start; i < end; i++ {
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString(placeholders)
			args = append(args, row(i)...)
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("bench: bulk insert into %s: %w", table, err)
		}
		if (end/batch)%200 == 0 { // commit every 100k rows: bounded WAL and memory
			if err := tx.Commit(); err != nil {
				return err
			}
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// bulkOrders adds n orders of tenant (new random IDs, so that they never
// collide with the bench's requests) in the shape of the orders table.
func bulkOrders(ctx context.Context, db *sql.DB, dialect, tenant string, n int) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	fp := "v1:" + strings.Repeat("ab", 32)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	if err := bulkInsert(ctx, db, dialect, "orders",
		[]string{"tenant_id", "id", "version", "status", "create_fingerprint", "fingerprint", "created_at", "updated_at",
			"customer", "currency", "note", "total_cents"},
		n, func(i int) []any {
			return []any{tenant, ids[i], 1, "draft", fp, fp, now, now, "cus_1", "EUR", "", 2000}
		}); err != nil {
		return err
	}
	return bulkInsert(ctx, db, dialect, "order_items",
		[]string{"tenant_id", "order_id", "position", "sku", "quantity", "unit_price_cents"},
		n, func(i int) []any { return []any{tenant, ids[i], 0, "sku_1", 2, 1000} })
}

// bulkRecords adds n completed idempotency records of tenant "scale" for
// the transfers operation, expiring at expiresAt (in the past: the
// janitor's work).
func bulkRecords(ctx context.Context, db *sql.DB, dialect string, n int, tag string, expiresAt time.Time) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	fp := "v1:" + strings.Repeat("cd", 32)
	body := []byte(`{"id":"tr_0123456789abcdef","from_account":"acc_1","to_account":"acc_2","amount":1,"currency":"EUR","created_at":"2026-01-01T00:00:00Z"}`)
	// SQLite keeps the records' times as fixed-width UTC text, the form the
	// record store compares on the database clock.
	var created, expires any = now, expiresAt
	if dialect == "sqlite" {
		const layout = "2006-01-02 15:04:05.000"
		created, expires = now.Format(layout), expiresAt.UTC().Format(layout)
	}
	return bulkInsert(ctx, db, dialect, "idempotency_records",
		[]string{"tenant_id", "operation", "idem_key", "fingerprint", "fingerprint_version", "state", "recovery_point",
			"attempt", "fence", "response_status", "response_headers", "response_body", "response_truncated", "created_at", "updated_at", "expires_at"},
		n, func(i int) []any {
			return []any{"scale", transfers.Operation, fmt.Sprintf("%s-%d", tag, i), fp, 1, "completed", "started",
				1, i + 1, 201, `{"Content-Type":["application/json"]}`, body, false, created, created, expires}
		})
}

// analyze refreshes the planner's statistics of tables after a bulk load
// (of every table on PostgreSQL and SQLite, where tables is nil).
func analyze(ctx context.Context, db *sql.DB, dialect string, tables ...string) error {
	if len(tables) == 0 && dialect != "mysql" {
		_, err := db.ExecContext(ctx, "ANALYZE")
		return err
	}
	if len(tables) == 0 {
		tables = []string{"orders", "order_items", "idempotency_records"}
	}
	for _, table := range tables {
		q := "ANALYZE " + table
		if dialect == "mysql" {
			// ANALYZE TABLE answers with a result set, a row per table.
			q = "ANALYZE TABLE " + table
		}
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}
