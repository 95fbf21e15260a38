// Package pgha runs a throwaway high-availability PostgreSQL for tests
// that fail the database over: a pg_auto_failover formation of a monitor, a
// primary and a standby, all on free ports of 127.0.0.1 in one temporary
// directory, as [pgtemp] does for a single server.
//
// [Start] creates the formation with pg_autoctl (Debian package
// postgresql-15-auto-failover) and returns once the standby is a
// synchronous one: every commit the primary acknowledges is on the standby
// too. [Formation.DSN] is the multi-host connection string an application
// uses (target_session_attrs=read-write, so that a new connection finds the
// primary wherever it is). The faults: [Formation.PerformFailover] (the
// operator's switchover), [Formation.KillPrimary] (SIGKILL of the primary's
// postmaster and of its keeper, as a lost machine), [Formation.StopPrimary]
// (pg_autoctl stop). [Formation.Rejoin] starts a lost node again; it comes
// back as the standby, and [Formation.WaitReplicated] waits until the pair
// is synchronous again.
//
// The test is skipped when pg_autoctl or the PostgreSQL server binaries
// are not installed, and fails instead when CI is set. pg_autoctl refuses to
// run as root: under root every command runs as the postgres user, in a
// directory it owns. The monitor is tuned to notice a lost primary within
// seconds (health checks every second, a node unhealthy after 3 s, a
// demote timeout of 3 s) instead of its production defaults (20 s, 30 s),
// and the nodes run with fsync=off, like pgtemp's server.
package pgha
