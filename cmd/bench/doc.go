// Command bench measures retrysafe's demo API against a naive gin + gorm
// handler that does the same work with no idempotency, side by side in one
// invocation, over real HTTP on loopback. Creates are also compared with
// the naive create that writes the same outbox event (naive-outbox) and,
// on PostgreSQL, with the floor (one pgx batch); replays with a
// hand-written idempotency middleware's replay (naive-replay). Each ratio
// is printed twice: the median of the per-round ratios and the ratio of
// the medians.
//
//	go run ./cmd/bench                                  # SQLite, every scenario
//	go run ./cmd/bench -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	    -c 32 -d 3s -rounds 3 -server-proc -json bench.json -chart docs/bench.svg
//	go run ./cmd/bench -db 'mysql://root@127.0.0.1:3306/test' -c 32 -d 3s -rounds 3 -server-proc
//	go run ./cmd/bench -db postgres://… -scale          # 0, 100k and 1M rows
//	go run ./cmd/bench -db postgres://… -soak 5m        # mixed load, RSS and goroutines
//	go run ./cmd/bench -db postgres://PRIMARY… -replica postgres://STANDBY… \
//	    -scenarios get,post-local-replay,payments-replay  # each again as NAME@replica
//
// On PostgreSQL and MariaDB the bench creates a database of its own next
// to the one -db names and drops it at the end; on PostgreSQL so that
// pg_stat_database's commit counter is this run's alone (MariaDB's
// counters, Com_commit and InnoDB's, are the server's). Rounds interleave the scenarios and every
// figure is the median over the rounds, so ratios hold on a noisy machine.
// -server-proc runs the server in a child process (this binary's "serve"
// mode) so that its CPU per request is the server's alone; otherwise the
// CPU figure covers server and load generator together. -cpuprofile writes
// a pprof CPU profile of the server (of the whole process without
// -server-proc). -off row-plans,insert-first runs the server without the
// store's speed tricks of those names, each turned off by its switch in
// store.Config, so that a run beside a default one measures what each
// saves:
//
//	go run ./cmd/bench -db postgres://… -scenarios naive,put-create,put-replay -off row-plans
package main
