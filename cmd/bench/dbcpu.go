package main

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// userHZ is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// serverProcesses names the processes of each dialect's database server:
// PostgreSQL's backends and background workers (WAL writer, checkpointer,
// autovacuum) are processes named postgres; MariaDB is one process,
// mariadbd (mysqld before 10.5), with a thread per connection.
var serverProcesses = map[string][]string{
	"postgres": {"postgres"},
	"mysql":    {"mariadbd", "mysqld"},
}

// localServer reports whether the database server of dsn runs on this
// machine, where its processes' CPU can be read from /proc.
func localServer(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	switch u.Hostname() {
	case "", "localhost", "127.0.0.1", "::1":
	default:
		return false
	}
	_, err = os.Stat("/proc/self/stat")
	return err == nil
}

// procTicks is the CPU time (in USER_HZ ticks) used so far by each process
// of the database server on this machine.
type procTicks map[string]int64

// serverTicks reads the CPU time of the processes named one of names.
func serverTicks(names []string) procTicks {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := procTicks{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: comm may hold spaces, so
		// the fields are counted from its closing parenthesis.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open || !slices.Contains(names, string(b[open+1:end])) {
			continue
		}
		f := bytes.Fields(b[end+1:])
		if len(f) < 13 {
			continue
		}
		utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
		stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
		if err1 == nil && err2 == nil {
			out[filepath.Base(filepath.Dir(path))] = utime + stime
		}
	}
	return out
}

// since is the CPU seconds the processes of now used after before: a
// process that started meanwhile counts whole, one that exited meanwhile
// takes its share with it (the bench's pool keeps its backends open).
func (now procTicks) since(before procTicks) float64 {
	var ticks int64
	for pid, t := range now {
		ticks += max(t-before[pid], 0)
	}
	return float64(ticks) / userHZ
}
