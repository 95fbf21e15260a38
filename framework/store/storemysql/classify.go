package storemysql

import (
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/retrysafe/retrysafe/framework/store"
)

// errorKind is what a MySQL-family error means to the framework; the
// store's sentinel errors are chosen from it.
type errorKind int

const (
	otherError errorKind = iota
	// lockTimeout: a concurrent transaction held a lock too long. The
	// statement was rolled back (InnoDB keeps the rest of the transaction
	// unless innodb_rollback_on_timeout is on; the framework rolls it
	// back): nothing of it may be taken as committed, and the request may
	// be tried again.
	lockTimeout
	// deadlock: the server chose this transaction as a deadlock's victim
	// and rolled it back whole; it may run again as it is.
	deadlock
	// unavailable: the server cannot be reached or refuses work for a
	// reason outside the request.
	unavailable
	// uniqueViolation: a primary key or unique index refused the row.
	uniqueViolation
	// unstorableText: a value the column cannot hold as given (not
	// utf8mb4, too long): refused, never truncated, under the strict
	// sql_mode the driver requires.
	unstorableText
)

// Server error numbers (MariaDB and MySQL share them).
const (
	erDupEntry             = 1062 // ER_DUP_ENTRY
	erDupEntryWithKeyName  = 1586 // ER_DUP_ENTRY_WITH_KEY_NAME
	erLockWaitTimeout      = 1205 // ER_LOCK_WAIT_TIMEOUT (innodb_lock_wait_timeout)
	erLockDeadlock         = 1213 // ER_LOCK_DEADLOCK
	erTruncatedWrongValue  = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: "Incorrect string value"
	erDataTooLong          = 1406 // ER_DATA_TOO_LONG
	erInvalidCharString    = 1300 // ER_INVALID_CHARACTER_STRING
	erConCount             = 1040 // ER_CON_COUNT_ERROR: too many connections
	erDBAccessDenied       = 1044 // ER_DBACCESS_DENIED_ERROR: the user may not use the database
	erAccessDenied         = 1045 // ER_ACCESS_DENIED_ERROR: the login is refused
	erBadDB                = 1049 // ER_BAD_DB_ERROR: the DSN's database does not exist
	erOutOfResources       = 1041 // ER_OUT_OF_RESOURCES
	erServerShutdown       = 1053 // ER_SERVER_SHUTDOWN
	erQueryInterrupted     = 1317 // ER_QUERY_INTERRUPTED (KILL QUERY)
	erDiskFull             = 1021 // ER_DISK_FULL
	erRecordFileFull       = 1114 // ER_RECORD_FILE_FULL: the table is full
	erLockTableFull        = 1206 // ER_LOCK_TABLE_FULL
	erReadOnlyTransaction  = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	erOptionPreventsStmt   = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only (a replica, a failover)
	erConnectionKilled     = 1927 // ER_CONNECTION_KILLED (MariaDB)
	erStatementTimeout     = 1969 // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
	erQueryTimeout         = 3024 // ER_QUERY_TIMEOUT (MySQL max_execution_time)
	erNetReadInterrupted   = 1159 // ER_NET_READ_INTERRUPTED
	erNetWriteInterrupted  = 1161 // ER_NET_WRITE_INTERRUPTED
	erNetErrorOnWrite      = 1160 // ER_NET_ERROR_ON_WRITE
	erNetReadError         = 1158 // ER_NET_READ_ERROR
	erAbortingConnection   = 1152 // ER_ABORTING_CONNECTION
	erNewAbortingConnecton = 1184 // ER_NEW_ABORTING_CONNECTION
)

// kindOf reads what err means. Connection-class failures come first: a
// network error, a connection the driver found broken, the context's
// deadline.
func kindOf(err error) errorKind {
	if err == nil {
		return otherError
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case erLockWaitTimeout:
			return lockTimeout
		case erLockDeadlock:
			return deadlock
		case erDupEntry, erDupEntryWithKeyName:
			return uniqueViolation
		case erTruncatedWrongValue, erDataTooLong, erInvalidCharString:
			return unstorableText
		case erConCount, erOutOfResources, erServerShutdown, erQueryInterrupted, erDiskFull, erRecordFileFull,
			erLockTableFull, erReadOnlyTransaction, erOptionPreventsStmt, erConnectionKilled, erStatementTimeout,
			erQueryTimeout, erNetReadInterrupted, erNetWriteInterrupted, erNetErrorOnWrite, erNetReadError,
			erAbortingConnection, erNewAbortingConnecton,
			// The server refuses the connection itself, as PostgreSQL's
			// driver reports any failure while connecting.
			erBadDB, erAccessDenied, erDBAccessDenied:
			return unavailable
		}
		return otherError
	}
	if isConnectionError(err) {
		return unavailable
	}
	return otherError
}

// isConnectionError reports errors that mean the connection is gone or
// did not answer in time: the driver's broken-connection errors, and what
// [store.ConnectionLost] knows of every driver.
func isConnectionError(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, mysql.ErrMalformPkt) ||
		errors.Is(err, mysql.ErrPktSync) || errors.Is(err, mysql.ErrPktSyncMul) || store.ConnectionLost(err)
}
