package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Driver is one database family: everything the framework does that
// differs between databases, and the only code that imports a database
// driver. The framework's drivers are the packages beside this one:
// storepg (PostgreSQL through pgx), storemysql (MariaDB, the MySQL
// family), storesqlite (the pure-Go SQLite of github.com/glebarez/sqlite). An application imports the driver packages
// of the databases it uses; each registers itself ([Register]) when it is
// imported, and [New] and [Open] find it.
//
// The interface serves the framework's own packages. It may gain methods
// in any release: a driver outside this repository is not supported. A
// new database family is a package beside the others that passes the
// contract suite in storetest (the package doc, "Adding a database").
type Driver interface {
	// Name is the family's name ("postgres", "mysql", "sqlite"): the
	// db.system.name of the store's spans, and the folder of an
	// application's own migrations for this database (migrations.Apply).
	Name() string
	// Dialectors are the names of the gorm dialectors
	// (gorm.Dialector.Name) whose handles [New] gives to this driver.
	Dialectors() []string
	// Schemes are the DSN prefixes that [Open] gives to this driver, for
	// example "postgres://".
	Schemes() []string
	// Open opens a pool for dsn, which starts with one of Schemes, and
	// returns the gorm dialector on it and the pool (which [Open] closes
	// when gorm cannot open the dialector). The pool traces with
	// cfg.TracerProvider through [RedactingTracerProvider]; the dialector's
	// connection timeouts come from cfg.
	Open(ctx context.Context, dsn string, cfg Config) (gorm.Dialector, *sql.DB, error)
	// DefaultMaxOpenConns is the size of [Open]'s pool when
	// [Config.MaxOpenConns] is 0.
	DefaultMaxOpenConns() int
	// Check is [New]'s start-up check of what the framework cannot set
	// per transaction (a server version, a journal mode); it fails with
	// [ErrMisconfigured] and what to change. It returns the driver New
	// keeps for db: itself, or itself set up for what it found on db's
	// pool (storemysql batches a transaction's statements on a pool that
	// allows it), as river binds its driver to one pool.
	Check(ctx context.Context, db *gorm.DB) (Driver, error)
	// Now is the database clock as an SQL expression, for the times that
	// processes whose clocks disagree must judge alike. Scan its value
	// into a [DatabaseTime].
	Now() string
	// ClockResolution is the resolution of the database clock as Now reads
	// it: a microsecond, or a millisecond (SQLite). The [Clock] truncates
	// its estimates to it, so that an estimate is never ahead of a reading
	// of the database clock taken after it, and a row a create stamped
	// with an estimate never looks younger than one a later write stamped
	// with a reading.
	ClockResolution() time.Duration
	// LockRow makes the query q take a row lock (SELECT … FOR UPDATE), or
	// returns q unchanged where every write transaction already holds the
	// database's write lock (SQLite).
	LockRow(q *gorm.DB) *gorm.DB
	// Classify returns err wrapped with the store's sentinel error it is
	// ([ErrUnavailable], [ErrLockTimeout], [ErrUniqueViolation],
	// [ErrUnstorableText]), or err unchanged; a lock timeout whose lock
	// covers more than rows is [ErrBusy] too. Nothing outside a driver
	// reads a database's error codes.
	Classify(err error) error
	// Begin begins a write transaction on conn with opts' timeouts applied
	// to it alone, so that they hold on an application's own pool and
	// behind a transaction pooler. A begin that waits for another writer
	// past opts.LockTimeout fails with an error that Classify reports as
	// [ErrLockTimeout] ([ErrBusy] where the lock is the database's); one
	// whose context ends first, with the context's error.
	Begin(ctx context.Context, conn *sql.Conn, opts TxOptions) (Tx, error)
	// ReadSnapshot runs queries on conn in one read-only snapshot and
	// returns each built query with its result ([ReadSnapshot]).
	ReadSnapshot(ctx context.Context, db *gorm.DB, conn *sql.Conn, queries []func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error)
	// Rows returns the statements of resource rows on this database
	// ([Rows]), the PUT pattern's; [New] builds the one of a [DB]
	// ([DB.Rows]).
	Rows(cfg RowsConfig) Rows
	// Records returns the SQL of the idempotency records in this
	// database's spelling ([Records]), on the tables of the driver's
	// migrations.
	Records() Records
	// Outbox returns the statements of the transactional outbox on this
	// database ([Outbox]).
	Outbox() Outbox
	// Migrations returns the framework's migrations on this database and
	// what goose needs to apply migrations there ([DB.Migrate]).
	Migrations() Migrations
}

// TxOptions are what [Driver.Begin] sets on one transaction.
type TxOptions struct {
	// LockTimeout bounds a wait for a lock a concurrent transaction holds
	// ([Config.LockTimeout]).
	LockTimeout time.Duration
	// StatementTimeout bounds one statement on the server, where the
	// database has such a bound ([Config.StatementTimeout]).
	StatementTimeout time.Duration
}

// Tx is the connection of one [DB.Write] transaction as gorm sees it. It
// is a gorm.TxCommitter, so that gorm treats it as a transaction (a nested
// Transaction becomes a savepoint) and never begins one of its own on it;
// its Commit and Rollback fail, for Write ends the transaction from fn's
// return value, with Finish or Abort.
type Tx interface {
	gorm.ConnPool
	gorm.TxCommitter
	// Finish commits, and restores what Begin set on the connection's
	// session. An error means nothing may be taken as committed.
	Finish(ctx context.Context) error
	// Abort rolls back, dropping anything not sent yet. A connection whose
	// state it cannot know afterwards is discarded, not returned to the
	// pool.
	Abort(ctx context.Context)
}

// ErrOwnedByWrite is what the Commit and Rollback of a [Tx] return: the
// transaction of [DB.Write] is ended by Write, from fn's return value.
var ErrOwnedByWrite = errors.New("store: the transaction of DB.Write is committed or rolled back by Write, from fn's return value")

var drivers struct {
	sync.RWMutex
	all []Driver
	// byDialector is the driver of each gorm dialector name, so that
	// [DriverOf] costs a map lookup on every event write.
	byDialector map[string]Driver
}

// Register makes d the driver of its [Driver.Dialectors] and
// [Driver.Schemes] for [New] and [Open]. Driver packages call it from
// their init function; it panics when a name or scheme already has a
// driver, as database/sql's Register does.
func Register(d Driver) {
	drivers.Lock()
	defer drivers.Unlock()
	for _, other := range drivers.all {
		for _, n := range d.Dialectors() {
			if slices.Contains(other.Dialectors(), n) {
				panic("store: Register: a driver for dialector " + n + " is registered already")
			}
		}
		for _, s := range d.Schemes() {
			if slices.Contains(other.Schemes(), s) {
				panic("store: Register: a driver for DSN scheme " + s + " is registered already")
			}
		}
	}
	drivers.all = append(drivers.all, d)
	if drivers.byDialector == nil {
		drivers.byDialector = map[string]Driver{}
	}
	for _, n := range d.Dialectors() {
		drivers.byDialector[n] = d
	}
}

// Drivers returns the registered drivers, in the order they registered.
func Drivers() []Driver {
	drivers.RLock()
	defer drivers.RUnlock()
	return slices.Clone(drivers.all)
}

// DriverOf returns the registered driver that serves gdb's gorm dialector,
// as [New] finds it: the driver of a transaction that a transactional twin
// was given, where no [DB] is at hand. A dialector no registered driver
// serves fails with [ErrMisconfigured], naming the package to import.
func DriverOf(gdb *gorm.DB) (Driver, error) { return driverFor(gdb.Dialector.Name()) }

// driverFor returns the registered driver that serves the gorm dialector
// named name.
func driverFor(name string) (Driver, error) {
	drivers.RLock()
	d, ok := drivers.byDialector[name]
	drivers.RUnlock()
	if ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: no store driver serves the gorm dialector %q; import the driver package of your database (%s)",
		ErrMisconfigured, name, driverPackages)
}

// driverForDSN returns the registered driver whose scheme starts dsn.
func driverForDSN(dsn string) (Driver, error) {
	for _, d := range Drivers() {
		for _, s := range d.Schemes() {
			if strings.HasPrefix(dsn, s) {
				return d, nil
			}
		}
	}
	var schemes []string
	for _, d := range Drivers() {
		schemes = append(schemes, d.Schemes()...)
	}
	if len(schemes) == 0 {
		return nil, fmt.Errorf("%w: no store driver is registered; import the driver package of your database (%s)", ErrUnknownDSN, driverPackages)
	}
	return nil, fmt.Errorf("%w: the registered drivers take %s; for another database import its driver package (%s)",
		ErrUnknownDSN, strings.Join(schemes, ", "), driverPackages)
}

// driverPackages names the framework's driver packages for error messages.
const driverPackages = "github.com/retrysafe/retrysafe/framework/store/storepg for PostgreSQL, …/storemysql for MariaDB, …/storesqlite for SQLite"
