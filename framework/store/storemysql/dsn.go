package storemysql

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Scheme is the DSN prefix of the MySQL family: mysql://user:pass@host:port/db?param=value.
const Scheme = "mysql://"

// ErrDSN is returned (wrapped) for a DSN that is not a mysql:// URL the
// driver can use.
var ErrDSN = errors.New("storemysql: invalid mysql:// DSN")

// sessionSQLMode is the sql_mode of the connections the driver opens:
// strict, so that a value that does not fit (a too long or undecodable
// string, an out-of-range number) is an error and never a warning with a
// truncated row stored.
const sessionSQLMode = "STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

// Config turns a mysql:// URL into the go-sql-driver configuration the
// driver opens: the URL's user, password, host (port 3306 when it names
// none) and database; its query parameters are go-sql-driver's (for
// example tls=true). Whatever the URL says, the connection parses DATETIME
// into time.Time in UTC (parseTime=true, loc=UTC), speaks utf8mb4, runs
// its session in UTC (time_zone='+00:00') and in a strict sql_mode, and
// gives up connecting after connectTimeout unless the URL sets timeout;
// affected rows are changed rows (clientFoundRows=false); it takes several
// statements in one query with its placeholders filled in on this side
// (multiStatements=true, interpolateParams=true), so that a write
// transaction is one round trip.
func Config(dsn string, connectTimeout time.Duration) (*mysql.Config, error) {
	if !strings.HasPrefix(dsn, Scheme) {
		return nil, fmt.Errorf("%w: %q does not start with %s", ErrDSN, redactURL(dsn), Scheme)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDSN, redactParseError(err))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: no host", ErrDSN)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":3306"
	}
	db := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(db, "/") {
		return nil, fmt.Errorf("%w: the path must be one database name", ErrDSN)
	}
	// go-sql-driver parses its own query parameters; the rest of the URL
	// is set on the result.
	cfg, err := mysql.ParseDSN("tcp(" + host + ")/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDSN, err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// Affected rows count the rows a statement changed, so that an
	// INSERT … ON DUPLICATE KEY UPDATE whose assignment changes nothing
	// reports 0: how the framework's "insert unless present" tells the two
	// apart.
	cfg.ClientFoundRows = false
	// Several statements go out in one query, their placeholders filled
	// in by go-sql-driver: a write transaction's begin, queued writes and
	// COMMIT then cost one round trip (batchTx) instead of a prepare and
	// an execute each. go-sql-driver quotes values for the session's
	// character set, which is utf8mb4 (below; it refuses to interpolate
	// for the character sets where quoting is unsafe) and follows the
	// server's NO_BACKSLASH_ESCAPES; binary values go as _binary literals.
	// Application code on the store's handle keeps to placeholders (gorm
	// does): a value spliced into SQL text by hand could now smuggle a
	// second statement.
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	// The driver's own log lines (a connection that broke) would go to
	// stderr; the error reaches the caller, and the store logs or
	// classifies it.
	cfg.Logger = discardLogger{}
	if u.Query().Get("timeout") == "" {
		cfg.Timeout = max(time.Second, connectTimeout)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if !strings.HasPrefix(cfg.Collation, "utf8mb4_") {
		cfg.Collation = "utf8mb4_general_ci"
	}
	if err := cfg.Apply(mysql.Charset("utf8mb4", cfg.Collation)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDSN, err)
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'" + sessionSQLMode + "'"
	return cfg, nil
}

// OpenDB opens a database/sql pool for a mysql:// DSN as [Config] sets
// it up, for what needs the database without the framework (migrations,
// an administrator creating databases). It does not connect.
func OpenDB(dsn string, connectTimeout time.Duration) (*sql.DB, error) {
	cfg, err := Config(dsn, connectTimeout)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDSN, err)
	}
	return sql.OpenDB(conn), nil
}

// redactURL is dsn with its password replaced, for error messages.
func redactURL(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

// redactParseError drops the URL (and so the password) that url.Parse
// quotes in its error.
func redactParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// discardLogger is a go-sql-driver logger that logs nothing.
type discardLogger struct{}

func (discardLogger) Print(...any) {}
