package storemysql_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// ownGorm opens a *gorm.DB on a new database the way an application does
// (gorm.io/driver/mysql on a DSN of its own), with none of the driver's
// settings; params are the DSN's query parameters.
func ownGorm(tb testing.TB, params string) *gorm.DB {
	tb.Helper()
	u, err := url.Parse(testdb.New(tb, "mysql"))
	if err != nil {
		tb.Fatal(err)
	}
	dsn := u.User.String() + "@tcp(" + u.Host + ")" + u.Path + "?" + params
	gdb, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if sqlDB, err := gdb.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return gdb
}

// harness is the contract suite's harness on MariaDB, its application's
// handle opened with the DSN parameters params.
func harness(params string) storetest.Harness {
	return storetest.Harness{
		Name: "mysql",
		DSN:  func(tb testing.TB) string { return testdb.New(tb, "mysql") },
		Gorm: func(tb testing.TB) *gorm.DB { return ownGorm(tb, params) },
		// A dynamic column of MariaDB's must be its own binary format.
		// SET, not SELECT: go-sql-driver v1.10.1 waits for the context's
		// end on an Exec of a prepared SELECT whose result fails.
		RefusedQuery: "SET @retrysafe_refused = COLUMN_JSON(?)",
	}
}

func TestContract(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	storetest.Exercise(t, harness("parseTime=true&charset=utf8mb4"))
}

// TestContractBatched runs the contract suite on an application's handle
// that batches (multiStatements and interpolateParams, as Open's pool
// does), so that the pipelined transaction passes all of it too.
func TestContractBatched(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	storetest.Exercise(t, harness("parseTime=true&charset=utf8mb4&multiStatements=true&interpolateParams=true"))
}

// TestNewRefusesWhatItCannotServe: New refuses, with ErrMisconfigured and
// what to change, a handle that reads DATETIME as bytes, speaks another
// character set, stores a value that does not fit truncated, or counts
// matched rows; the handle an application opens with parseTime=true and
// utf8mb4 on a default server is served.
func TestNewRefusesWhatItCannotServe(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	for params, want := range map[string]string{
		"charset=utf8mb4":               "parseTime=true",
		"parseTime=true&charset=latin1": "utf8mb4",
		"parseTime=true&charset=utf8mb4&sql_mode=%27NO_ENGINE_SUBSTITUTION%27": "STRICT_ALL_TABLES",
		"parseTime=true&charset=utf8mb4&clientFoundRows=true":                  "clientFoundRows",
	} {
		_, err := store.New(ctx, ownGorm(t, params), store.Config{})
		if !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), want) {
			t.Errorf("New on a handle with %s = %v, want ErrMisconfigured naming %s", params, err, want)
		}
	}
	db, err := store.New(ctx, ownGorm(t, "parseTime=true&charset=utf8mb4"), store.Config{})
	if err != nil {
		t.Fatalf("New on an application's handle: %v", err)
	}
	if db.Driver.Name() != "mysql" {
		t.Fatalf("driver %s", db.Driver.Name())
	}
}

// TestOpenReachesMariaDB: store.Open takes a mysql:// URL, and an
// unreachable server fails with ErrUnavailable.
func TestOpenReachesMariaDB(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, "mysql"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var now store.DatabaseTime
	if err := db.Gorm.Raw("SELECT " + db.Driver.Now()).Row().Scan(&now); err != nil || now.Time.IsZero() || now.Time.Location() != time.UTC {
		t.Fatalf("the database clock: %v, %v", now.Time, err)
	}
	if _, err := store.Open(ctx, "mysql://root@127.0.0.1:1/x", store.Config{ConnectTimeout: time.Second}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want ErrUnavailable", err)
	}
}

// TestCheckVersion: MySQL is refused (no sequences, no INSERT …
// RETURNING), and so is a MariaDB older than 10.6.
func TestCheckVersion(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{"10.11.19-MariaDB-0+deb12u1": true, "10.7.0-MariaDB": true, "10.6.20-MariaDB": false, "11.4.2-MariaDB": true,
		"10.5.27-MariaDB": false, "8.0.36": false, "8.4.0-log": false} {
		if err := storemysql.CheckVersion(v); (err == nil) != ok || err != nil && !errors.Is(err, store.ErrMisconfigured) {
			t.Errorf("version %s: %v", v, err)
		}
	}
}
