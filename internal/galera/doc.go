// Package galera runs a throwaway three-node MariaDB Galera cluster for
// tests of multi-primary deployments, every node taking writes: three
// mariadbd processes on free ports of 127.0.0.1 in one temporary
// directory, as package pgha does for a PostgreSQL formation.
//
// [Start] creates the cluster from Debian's packages (mariadb-server,
// galera-4, rsync) and returns once the three nodes are Synced in one
// primary component; it takes 8 to 12 seconds on two loaded cores. The
// first node gets a fresh system schema (mariadb-install-db), bootstraps
// the cluster (--wsrep-new-cluster) and stops; the others start from
// copies of its data directory and join by an incremental state transfer
// (IST) of the few write sets since, rather than by a full one (SST, rsync
// of every file: 12 to 16 seconds in all). [Cluster.DSN] and
// [Cluster.URL] are a node's mysql://root@127.0.0.1:PORT/db URLs;
// [Config.Database] is created for the application. Nodes are numbered
// 0, 1, 2.
//
// The faults and states:
//
//   - [Cluster.Kill]: SIGKILL, a lost machine. The two others notice within
//     seconds and go on as the primary component; [Cluster.Restart] starts
//     the node on its data and it catches up by IST. While it rejoins it
//     refuses connections, then answers 1047 until it is Synced.
//   - [Cluster.Reseed]: the node killed, its data removed and started
//     empty: it rejoins by SST (rsync). Its donor blocks its own commits
//     while the files are copied (FLUSH TABLES WITH READ LOCK) and refuses
//     no query.
//   - [Cluster.Drain] / [Cluster.Undrain]: wsrep_reject_queries = ALL, the
//     operator's drain. Every statement that touches a table fails with
//     error 1047 (ER_UNKNOWN_COM_ERROR, "WSREP has not yet prepared node
//     for application use"); SELECT 1 and a ping succeed.
//   - [Cluster.Partition] / [Cluster.Heal]: the node cut off the group's
//     communication (the provider's gmcast.isolate), so that it is left
//     alone in a non-primary component (wsrep_ready=OFF, statements on
//     tables fail with 1047, SELECT 1 and a ping succeed) while the two
//     others go on. Stopping two nodes cleanly would not do: nodes that
//     leave cleanly leave the last one primary.
//   - [Cluster.PauseApply] / [Cluster.ResumeApply]: the node stops
//     applying the others' write sets (it holds FLUSH TABLES WITH READ
//     LOCK, which desyncs it) while the cluster goes on: a node that lags
//     on demand. Its plain reads see the past; a read with
//     wsrep_sync_wait waits.
//
// [Cluster.WaitSynced] waits until the running, unpartitioned nodes are
// Synced in one primary component of exactly them; [Cluster.CatchUp]
// until each has applied every write set committed before the call;
// [Cluster.NodeStatus] reads a node's wsrep status.
//
// The test is skipped when mariadbd, mariadb-install-db, the Galera
// provider (libgalera_smm.so), wsrep_sst_rsync or rsync is missing, and
// fails instead when CI is set. Under root every node runs as the mysql
// user, in a directory it owns. The nodes run with a small buffer pool
// and innodb_flush_log_at_trx_commit=2; their group communication notices
// a lost node within 3 seconds instead of 5 and takes a joining one in
// faster. Every port lies below the kernel's ephemeral range: a client
// polling a port nobody listens on yet (a node restarting, a node's group
// communication reconnecting to a killed one) can be given that very port
// for its own end and connect to itself, and the node could then not
// listen there.
package galera
