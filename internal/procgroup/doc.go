// Package procgroup runs a test's server as a process group of its own,
// so that a test can kill it whole, as the loss of its machine: the
// server and every process it started (pg_autoctl's postmaster and its
// backends, mariadbd's state transfer scripts). internal/pgha and
// internal/galera run their servers with it ([Process]; [Credential] runs
// one as another user, for servers that refuse root).
package procgroup
