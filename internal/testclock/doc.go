// Package testclock is an injectable clock for tests: they move it instead
// of sleeping through replay windows, leases and TTLs ([Clock], [New]).
package testclock
