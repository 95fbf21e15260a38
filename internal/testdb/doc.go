// Package testdb gives each test a database of its own: a fresh SQLite file
// always, a fresh PostgreSQL schema when TEST_DATABASE_URL is set, and a
// fresh MariaDB/MySQL database when TEST_MYSQL_URL is set. All are removed
// when the test ends, so tests run in parallel and leave nothing behind.
// [New] and [Run] make one per dialect ([Dialects]), [Gorm] opens a
// handle on it, and [Age] moves resource rows into the past.
package testdb
