// Package tests holds the black-box tests of retrysafe: the demo's API
// over real HTTP on real databases (SQLite always, PostgreSQL with
// TEST_DATABASE_URL, MariaDB with TEST_MYSQL_URL), the fault suite
// (fault_*_test.go: lost answers, killed processes and databases,
// partitions, several processes, PgBouncer, failover, a soak), the
// recipes and walks of the docs run as written (recipes_test.go,
// migrating_doc_test.go), and the benchmarks of every create and replay
// through the router. It has no code of its own; docs/testing.md says how
// to run each suite.
package tests
