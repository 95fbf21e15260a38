// Package testlog holds what tests use to read the logs of code that runs
// concurrently with them: [Buffer], a log sink safe for concurrent writes.
package testlog
