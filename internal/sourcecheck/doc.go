// Package sourcecheck reads a package's own sources in its tests, for the
// boundary tests that keep SQL and per-database choices out of the
// packages above the storage seam: [NoSQL] fails a test on SQL or a
// database's name in a package's code, and [DatabaseBranches] lists every
// [Finding] of code that branches on the database outside framework/store.
package sourcecheck
