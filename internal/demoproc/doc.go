// Package demoproc builds the demo binary (cmd/demo) and runs it as a real
// process for black-box tests: several processes on one database, a
// process killed with SIGKILL and restarted on the same address, a process
// paused with SIGSTOP.
//
// [Build] compiles the binary once per test; [Start] runs it on a free port
// (or a given address) and returns once it prints that it listens;
// [Process.Kill], [Process.Restart] and [Process.Signal] inject the faults.
// Everything the process writes to stderr (its structured log) is kept and
// available through [Process.Log].
package demoproc
