package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net/url"

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
// Query parameters are not recorded (otelpgx records them only when asked),
// and a failed statement's error is recorded redacted ([redactingProvider]).
func postgresDialector(dsn string, tp trace.TracerProvider) (gorm.Dialector, *sql.DB, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	cc.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(redactingProvider{tp}), otelpgx.WithTrimSQLInSpanName())
	var opts []stdlib.OptionOpenDB
	if u, err := url.Parse(dsn); err == nil {
		if attrs := u.Query().Get("target_session_attrs"); attrs == "read-write" || attrs == "primary" {
			opts = append(opts, stdlib.OptionResetSession(discardReadOnly))
		}
	}
	pool := stdlib.OpenDB(*cc, opts...)
	return postgres.New(postgres.Config{Conn: pool}), pool, nil
}

// discardReadOnly drops a pooled connection whose server has become
// read-only since it was opened: a primary fenced for a switchover
// (default_transaction_read_only) or turned into a standby
// (in_hot_standby), as the server reports it (ParameterStatus, PostgreSQL
// 14+). Such a connection would answer every write 25006; dropped, the next
// one goes through target_session_attrs to the writable node. It is set
// only when the DSN asks for a writable node.
func discardReadOnly(_ context.Context, conn *pgx.Conn) error {
	pc := conn.PgConn()
	if pc.ParameterStatus("default_transaction_read_only") == "on" || pc.ParameterStatus("in_hot_standby") == "on" {
		return driver.ErrBadConn
	}
	return nil
}

// sqliteDialector opens a SQLite pool for dsn through otelsql, which
// traces every statement on tp without its arguments, and its errors
// redacted ([redactingProvider]).
func sqliteDialector(dsn string, tp trace.TracerProvider) (gorm.Dialector, *sql.DB, error) {
	pool, err := otelsql.Open(sqlite.DriverName, dsn, otelsql.WithTracerProvider(redactingProvider{tp}),
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

// redactingProvider gives the SQL tracers (otelpgx, otelsql) spans that
// record an error's text without the values it quotes ([RedactError]): a
// database's message can quote the input it refused (PostgreSQL's
// `invalid input syntax for type uuid: "…"`), and telemetry carries no
// request field value (DESIGN §7).
type redactingProvider struct{ trace.TracerProvider }

func (p redactingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return redactingTracer{p.TracerProvider.Tracer(name, opts...)}
}

type redactingTracer struct{ trace.Tracer }

func (t redactingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	// Into the context too: the tracers end a span they find there.
	wrapped := redactingSpan{span}
	return trace.ContextWithSpan(ctx, wrapped), wrapped
}

type redactingSpan struct{ trace.Span }

func (s redactingSpan) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	s.Span.RecordError(errors.New(RedactError(err)), opts...)
}

func (s redactingSpan) SetStatus(code codes.Code, description string) {
	s.Span.SetStatus(code, quoted.ReplaceAllString(description, `"…"`))
}
