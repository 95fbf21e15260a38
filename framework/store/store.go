package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Config tunes [Open]. The zero value is ready to use.
type Config struct {
	// LockTimeout bounds how long a write waits for a row lock held by a
	// concurrent transaction (PostgreSQL lock_timeout, SQLite busy_timeout).
	// A wait past it fails with [ErrLockTimeout], which the framework answers
	// 409 request_in_progress + Retry-After. Defaults to 1s.
	LockTimeout time.Duration
	// MaxOpenConns caps the connection pool. Defaults to 20 for PostgreSQL
	// and 4 for SQLite, whose writers take turns on one database lock.
	MaxOpenConns int
	// Logger receives gorm's slow-query and error reports, without
	// parameter values (see [NewGormLogger]). Defaults to a logger that
	// discards them.
	Logger *slog.Logger
	// ConnectTimeout bounds opening one connection to PostgreSQL (the
	// connect_timeout parameter, whole seconds) unless the DSN sets one, so
	// that a silent network fails instead of hanging. Defaults to 5s.
	ConnectTimeout time.Duration
	// StatementTimeout bounds one statement on the PostgreSQL server
	// (statement_timeout) and idle_in_transaction_session_timeout is set to
	// six times it, unless the DSN sets them. Defaults to 5s, below the
	// framework's request deadline of 10s.
	//
	// A client cannot bound the wait for a free pool connection apart from
	// the statement: database/sql waits until the context is done. Every
	// request carries a deadline (the framework's Deadline middleware);
	// give your own background work a context with a deadline too.
	StatementTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.LockTimeout == 0 {
		c.LockTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = 5 * time.Second
	}
}

// DB is a gorm handle together with its dialect.
type DB struct {
	Gorm    *gorm.DB
	Dialect Dialect
}

// Open connects to the database named by dsn: "sqlite:PATH" opens (and
// creates) a SQLite file in WAL mode with IMMEDIATE write transactions;
// "postgres://…" or "postgresql://…" opens PostgreSQL through pgx. Open
// pings the database, so an unreachable one fails here with [ErrUnavailable].
func Open(ctx context.Context, dsn string, cfg Config) (*DB, error) {
	cfg.setDefaults()
	if cfg.LockTimeout < 0 || cfg.MaxOpenConns < 0 || cfg.ConnectTimeout < 0 || cfg.StatementTimeout < 0 {
		return nil, errors.New("store: LockTimeout, MaxOpenConns, ConnectTimeout and StatementTimeout must not be negative")
	}
	gcfg := &gorm.Config{
		Logger:                 NewGormLogger(cfg.Logger, GormLoggerConfig{}),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	var (
		dialector gorm.Dialector
		dialect   Dialect
		maxConns  = cfg.MaxOpenConns
	)
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return nil, fmt.Errorf("%w: empty SQLite path", ErrUnknownDSN)
		}
		dialector = sqlite.Open(sqliteDSN(path, cfg.LockTimeout))
		dialect = sqliteDialect{}
		if maxConns == 0 {
			maxConns = 4
		}
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		pgDSN, err := postgresDSN(dsn, cfg)
		if err != nil {
			return nil, err
		}
		dialector = postgres.Open(pgDSN)
		dialect = postgresDialect{}
		if maxConns == 0 {
			maxConns = 20
		}
	default:
		return nil, ErrUnknownDSN
	}
	gdb, err := gorm.Open(dialector, gcfg)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", classify(dialect, err))
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: ping: %w", classify(dialect, err))
	}
	return &DB{Gorm: gdb, Dialect: dialect}, nil
}

// sqliteDSN builds the driver DSN: WAL journal, a busy timeout as the lock
// timeout, foreign keys on, and BEGIN IMMEDIATE so that a write transaction
// takes the write lock up front instead of failing on upgrade.
func sqliteDSN(path string, lockTimeout time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", lockTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// postgresDSN adds lock_timeout, statement_timeout,
// idle_in_transaction_session_timeout and connect_timeout as connection
// parameters, each unless the DSN sets it.
func postgresDSN(dsn string, cfg Config) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnknownDSN, err)
	}
	q := u.Query()
	for name, value := range map[string]string{
		"lock_timeout":                        strconv.FormatInt(cfg.LockTimeout.Milliseconds(), 10),
		"statement_timeout":                   strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10),
		"idle_in_transaction_session_timeout": strconv.FormatInt(6*cfg.StatementTimeout.Milliseconds(), 10),
		"connect_timeout":                     strconv.FormatInt(int64(max(time.Second, cfg.ConnectTimeout)/time.Second), 10),
	} {
		if q.Get(name) == "" {
			q.Set(name, value)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// SQL returns the underlying *sql.DB (for migrations and Close).
func (db *DB) SQL() *sql.DB {
	sqlDB, _ := db.Gorm.DB()
	return sqlDB
}

// Close closes the connection pool.
func (db *DB) Close() error { return db.SQL().Close() }

// Write runs fn in one write transaction, commits
// when fn returns nil and rolls back otherwise. Errors are passed through
// [DB.Classify]. Pass the *gorm.DB that fn receives to every transactional
// twin (…Tx) so that its writes commit together.
func (db *DB) Write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.Classify(db.Gorm.WithContext(ctx).Transaction(fn))
}

// Classify wraps err with [ErrLockTimeout] or [ErrUnavailable] when the
// dialect recognises it as one; other errors are returned unchanged.
func (db *DB) Classify(err error) error { return classify(db.Dialect, err) }

func classify(d Dialect, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLockTimeout) {
		return err
	}
	lockTimeout, unavailable := d.classify(err)
	switch {
	case lockTimeout:
		return fmt.Errorf("%w: %w", ErrLockTimeout, err)
	case unavailable:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
