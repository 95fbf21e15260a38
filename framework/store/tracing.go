package store

import (
	"database/sql"

	"github.com/XSAM/otelsql"
	"github.com/exaring/otelpgx"
	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// tracerName is the instrumentation scope of the store's own spans.
const tracerName = "github.com/retrysafe/retrysafe/framework/store"

// postgresDialector opens a pgx pool for dsn whose connections trace every
// query and batch with otelpgx on tp. The tracer sits on the pgx
// connection, under gorm: the pipelined writes and snapshot reads, which
// send pgx batches on the raw connection, are traced like gorm's queries.
// Query parameters are not recorded (otelpgx records them only when asked).
func postgresDialector(dsn string, tp trace.TracerProvider) (gorm.Dialector, *sql.DB, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	cc.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tp), otelpgx.WithTrimSQLInSpanName())
	pool := stdlib.OpenDB(*cc)
	return postgres.New(postgres.Config{Conn: pool}), pool, nil
}

// sqliteDialector opens a SQLite pool for dsn through otelsql, which
// traces every statement on tp without its arguments.
func sqliteDialector(dsn string, tp trace.TracerProvider) (gorm.Dialector, *sql.DB, error) {
	pool, err := otelsql.Open(sqlite.DriverName, dsn, otelsql.WithTracerProvider(tp),
		otelsql.WithAttributes(attribute.String("db.system.name", "sqlite")),
		otelsql.WithSpanOptions(otelsql.SpanOptions{OmitConnResetSession: true, OmitRows: true, OmitConnectorConnect: true}))
	if err != nil {
		return nil, nil, err
	}
	return &sqlite.Dialector{DriverName: sqlite.DriverName, Conn: pool}, pool, nil
}

// endSpan records err (if any) on span, without the values it may quote
// ([RedactError]), and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		msg := RedactError(err)
		span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.message", msg)))
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}
