// Package pgtemp runs a throwaway PostgreSQL server for tests that must
// kill, restart or partition the database itself, which a shared server
// cannot allow.
//
// [Start] runs initdb into a new temporary directory and starts the server
// on a free port of 127.0.0.1 with trust authentication; [Server.Kill]
// stops it as a crash would (pg_ctl stop -m immediate), [Server.Restart]
// brings it back on the same port and data. The binaries are taken from
// PATH or /usr/lib/postgresql/*/bin; the test is skipped when there are
// none. initdb refuses to run as root, so under root every PostgreSQL
// command runs as the postgres user (runuser) in a directory it owns.
//
// [Server.StartPgBouncer] puts a pgbouncer (Debian package pgbouncer) in
// front of the server, in transaction pooling by default, on a port of its
// own; the test is skipped when pgbouncer is not installed.
//
// The server runs with fsync=off: a killed server loses nothing the
// operating system already has, which is what these tests exercise; only a
// power loss would need fsync.
package pgtemp
