package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Config tunes [New] and [Open]. The zero value is ready to use.
type Config struct {
	// LockTimeout bounds how long a write waits for a row lock or the
	// database lock held by a concurrent transaction. [DB.Write] sets it on
	// each transaction (PostgreSQL SET LOCAL lock_timeout, SQLite busy
	// timeout). A wait past it fails with [ErrLockTimeout], which the
	// framework answers 409 request_in_progress + Retry-After when the
	// lock was the request's own key's ([ErrKeyLocked]: its resource row,
	// its idempotency record) and 503 unavailable + Retry-After otherwise
	// (another key's rows, a table lock, SQLite's database lock). Statements
	// run on DB.Gorm outside Write do not get it, so the framework makes
	// every write that may wait for a lock inside Write. Defaults to 1s.
	LockTimeout time.Duration
	// MaxOpenConns caps the connection pool that [Open] creates; [New]
	// leaves the application's pool as it is. Defaults to 20 for
	// PostgreSQL and the MySQL family and 4 for SQLite, whose writers take
	// turns on one database lock.
	MaxOpenConns int
	// Logger receives the slow-query and error reports of the gorm handle
	// that [Open] creates, without parameter values (see [NewGormLogger]);
	// [New] keeps the application's gorm logger, which then sees the
	// framework's statements without their values. Defaults to a logger
	// that discards them.
	// A zap user passes slog.New(zapslog.NewHandler(core)), from
	// go.uber.org/zap/exp/zapslog.
	Logger *slog.Logger
	// ConnectTimeout bounds opening one connection to PostgreSQL (the
	// connect_timeout parameter, whole seconds) unless the DSN sets one, so
	// that a silent network fails instead of hanging. Defaults to 5s.
	ConnectTimeout time.Duration
	// StatementTimeout bounds one statement of a [DB.Write] transaction on
	// the PostgreSQL server (SET LOCAL statement_timeout), and
	// idle_in_transaction_session_timeout is set to six times it, per
	// transaction like the lock timeout, so that it holds on an
	// application's own pool and behind PgBouncer. Reads outside Write are
	// bounded by their context (the request deadline). Defaults to 5s,
	// below the framework's request deadline of 10s. On MariaDB it is
	// max_statement_time for the transaction's statements: the session's,
	// set for the transaction, or, for a transaction that goes out whole
	// in one statement (a create), SET STATEMENT's for that statement. The
	// writes queued for the COMMIT's round trip and the COMMIT go as one
	// compound statement, which it bounds as a whole.
	//
	// A client cannot bound the wait for a free pool connection apart from
	// the statement: database/sql waits until the context is done. Every
	// request carries a deadline (the framework's Deadline middleware);
	// give your own background work a context with a deadline too.
	StatementTimeout time.Duration
	// TracerProvider makes the store's spans: a span per [DB.Write]
	// transaction ("store.write"), and, on the handle that [Open] creates,
	// a span per SQL statement and per pgx batch (otelpgx on PostgreSQL,
	// so that the pipelined transactions and snapshot reads, sent as pgx
	// batches, are traced too; otelsql on SQLite). The SQL spans carry the
	// statement's text with its placeholders, never its parameter values.
	// [New] keeps the application's driver: instrument it there. Defaults
	// to the global provider (otel.GetTracerProvider), which traces nothing
	// until the application sets one.
	TracerProvider trace.TracerProvider
	// Replica is a handle to a read replica of the database (a hot
	// standby), opened by the application with the same gorm dialector.
	// The framework reads it only where a lag cannot make an answer wrong
	// ([DB.Replica]): completed POST replays, and GET, HEAD and list
	// within the rules of docs/scaling.md. [New] pings it and checks it as
	// it checks the primary. An application that registers
	// gorm.io/plugin/dbresolver on the handle it gives [New] need not set
	// it: the store then reads the resolver's replicas for the same
	// reads, and pins every other read of the framework to the primary.
	Replica *gorm.DB
	// ReplicaDSN names a read replica for [Open], which opens it with the
	// primary's driver and settings and sets Replica (and closes it with
	// [DB.Close]). Ignored by [New] and when Replica is set.
	ReplicaDSN string
	// ReplicaTimeout bounds one read on the replica ([DB.ReadReplica]):
	// past it the framework reads the primary instead, so that a replica
	// that stops answering costs a request this long, not its deadline.
	// Defaults to 500ms.
	ReplicaTimeout time.Duration
	// ClockMaxAge is how long after the framework last read the database
	// clock a create may still be stamped with an estimate of it
	// ([Clock]) instead of reading first. Defaults to [ClockMaxAge] (1s);
	// negative keeps no estimate, so that every create reads first: the
	// switch of inserting first, for the bench.
	ClockMaxAge time.Duration
	// DisableRowPlans, for the bench, has every statement on a resource
	// row built by gorm at each call ([Rows]), without the plans that
	// spell a model's INSERT once and read a row by its key with the
	// database clock in one statement (a replay then costs a second
	// statement for the clock). Defaults to false: the plans.
	DisableRowPlans bool
}

func (c *Config) setDefaults() error {
	if c.LockTimeout < 0 || c.MaxOpenConns < 0 {
		return errors.New("store: LockTimeout and MaxOpenConns must not be negative")
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ConnectTimeout < 0 || c.StatementTimeout < 0 {
		return errors.New("store: ConnectTimeout and StatementTimeout must not be negative")
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = 5 * time.Second
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.ReplicaTimeout < 0 {
		return errors.New("store: ReplicaTimeout must not be negative")
	}
	if c.ReplicaTimeout == 0 {
		c.ReplicaTimeout = 500 * time.Millisecond
	}
	if c.ClockMaxAge == 0 {
		c.ClockMaxAge = ClockMaxAge
	}
	return nil
}

// DB is a gorm handle together with the [Driver] of its database.
type DB struct {
	Gorm   *gorm.DB
	Driver Driver

	lockTimeout      time.Duration
	statementTimeout time.Duration
	tracer           trace.Tracer
	replica          *gorm.DB
	replicaTimeout   time.Duration
	ownedReplica     *sql.DB // opened by Open from ReplicaDSN
	clock            Clock
	rows             Rows
}

// New wraps an application's own *gorm.DB for the framework; the [Driver]
// is the registered one that serves gdb's dialector (import
// framework/store/storepg for gorm.io/driver/postgres, storemysql for
// gorm.io/driver/mysql, storesqlite for github.com/glebarez/sqlite). The application keeps its pool, its DSN,
// its logger and its migrations: what the framework needs per
// transaction, [DB.Write] sets per transaction. [DB.Gorm] is a session of
// gdb whose gorm logger is gdb's without parameter values: every
// statement run on it or on its transactions (the framework's, and the
// application's own inside [DB.Write]) reaches gdb's logger with its
// placeholders, errors with their quoted values redacted, and a unique
// index's refusal, which the framework expects, as no error. Give gdb
// [NewGormLogger] to have the rest of its statements logged so too. New pings the database (an
// unreachable one fails with [ErrUnavailable]) and runs the driver's
// [Driver.Check] of what it cannot set itself, failing with
// [ErrMisconfigured] and what to change. Closing gdb stays the
// application's job ([DB.Close] closes it too).
func New(ctx context.Context, gdb *gorm.DB, cfg Config) (*DB, error) {
	if gdb == nil {
		return nil, errors.New("store: New needs a *gorm.DB")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	d, err := driverFor(gdb.Dialector.Name())
	if err != nil {
		return nil, err
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: ping: %w", classify(d, err))
	}
	bound, err := d.Check(ctx, gdb)
	if err != nil {
		return nil, classify(d, err)
	}
	gdb = gdb.Session(&gorm.Session{Logger: withoutValues(gdb.Logger)})
	if cfg.Replica != nil {
		cfg.Replica = cfg.Replica.Session(&gorm.Session{Logger: withoutValues(cfg.Replica.Logger)})
	}
	db := &DB{Gorm: gdb, Driver: bound, lockTimeout: cfg.LockTimeout, statementTimeout: cfg.StatementTimeout,
		tracer: cfg.TracerProvider.Tracer(tracerName), clock: Clock{maxAge: cfg.ClockMaxAge, resolution: bound.ClockResolution()},
		rows: bound.Rows(RowsConfig{DisablePlans: cfg.DisableRowPlans})}
	if err := db.bindReplica(ctx, cfg); err != nil {
		return nil, err
	}
	return db, nil
}

// Open connects to the database named by dsn through the registered
// [Driver] of its scheme and wraps it with [New]: "sqlite:PATH" opens (and
// creates) a SQLite file in WAL mode (storesqlite); "postgres://…" or
// "postgresql://…" opens PostgreSQL through pgx (storepg);
// "mysql://user:pass@host:port/db" opens MariaDB or MySQL (storemysql).
// A DSN no registered driver takes fails with [ErrUnknownDSN]; an
// unreachable database, or one that does not exist on its server, with
// [ErrUnavailable].
func Open(ctx context.Context, dsn string, cfg Config) (*DB, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	d, err := driverForDSN(dsn)
	if err != nil {
		return nil, err
	}
	gdb, sqlDB, err := openGorm(ctx, d, dsn, cfg)
	if err != nil {
		return nil, err
	}
	var replicaDB *sql.DB
	if cfg.Replica == nil && cfg.ReplicaDSN != "" {
		rd, err := driverForDSN(cfg.ReplicaDSN)
		if err == nil && rd.Name() != d.Name() {
			err = fmt.Errorf("%w: Config.ReplicaDSN is a %s DSN and the primary's a %s one", ErrMisconfigured, rd.Name(), d.Name())
		}
		if err == nil {
			cfg.Replica, replicaDB, err = openGorm(ctx, d, cfg.ReplicaDSN, cfg)
		}
		if err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("store: replica: %w", err)
		}
	}
	db, err := New(ctx, gdb, cfg)
	if err != nil {
		_ = sqlDB.Close()
		if replicaDB != nil {
			_ = replicaDB.Close()
		}
		return nil, err
	}
	db.ownedReplica = replicaDB
	return db, nil
}

// openGorm opens dsn through d as a gorm handle with the store's settings
// and pool size.
func openGorm(ctx context.Context, d Driver, dsn string, cfg Config) (*gorm.DB, *sql.DB, error) {
	dialector, pool, err := d.Open(ctx, dsn, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("store: open: %w", classify(d, err))
	}
	gdb, err := gorm.Open(dialector, &gorm.Config{
		Logger:                 NewGormLogger(cfg.Logger, GormLoggerConfig{}),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		_ = pool.Close()
		return nil, nil, fmt.Errorf("store: open: %w", classify(d, err))
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		_ = pool.Close()
		return nil, nil, err
	}
	maxConns := cfg.MaxOpenConns
	if maxConns == 0 {
		maxConns = d.DefaultMaxOpenConns()
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return gdb, sqlDB, nil
}

// Clock is the estimate of the primary's clock that the framework's reads
// of it feed ([Clock]).
func (db *DB) Clock() *Clock { return &db.clock }

// Rows is the statements of resource rows on this database ([Rows]), built
// once by [New] for the store's configuration.
func (db *DB) Rows() Rows { return db.rows }

// SQL returns the underlying *sql.DB (for migrations and Close).
func (db *DB) SQL() *sql.DB {
	sqlDB, _ := db.Gorm.DB()
	return sqlDB
}

// Close closes the connection pool, and the replica's pool when [Open]
// opened it from [Config.ReplicaDSN].
func (db *DB) Close() error {
	if db.ownedReplica != nil {
		_ = db.ownedReplica.Close()
	}
	return db.SQL().Close()
}

// Classify wraps err with the store's sentinel error it is
// ([ErrLockTimeout], [ErrUnavailable], [ErrUniqueViolation],
// [ErrUnstorableText]) when the driver recognises it as one; other errors
// are returned unchanged.
func (db *DB) Classify(err error) error { return classify(db.Driver, err) }

func classify(d Driver, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLockTimeout) ||
		errors.Is(err, ErrUniqueViolation) || errors.Is(err, ErrUnstorableText) {
		return err
	}
	return d.Classify(err)
}

// Classify is [DB.Classify] for an error whose database is not at hand:
// err wrapped with the sentinel error that a registered [Driver]
// recognises it as, or err unchanged. A driver recognises only its own
// database's errors, besides lost connections.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	for _, d := range Drivers() {
		if c := classify(d, err); c != err {
			return c
		}
	}
	return err
}
