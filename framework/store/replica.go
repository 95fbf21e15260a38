package store

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"
)

// Reads from a replica. A replica lags: it has not yet seen the last
// commits of the primary. The framework sends it only the reads whose
// answer a lag cannot make wrong, and reads the primary for every other
// (docs/scaling.md, "Reads from replicas"):
//
//   - the read-first of a POST replay (fallback/postkeys) is answered from
//     the replica only when it finds the key's record completed, for the
//     same request, and far from the end of its window; a completed
//     record never changes, so the replica's copy is the primary's. Any
//     other finding (no record yet, in progress, another request's, near
//     expiry) is read again on the primary.
//   - GET, HEAD and list of a collection may be answered from the replica:
//     a representation as of a moment ago, never one older than a version
//     the client shows it has (If-None-Match), never a 404 for a resource
//     the replica has not seen yet, and never when the request says
//     Cache-Control: no-cache. Those are read on the primary.
//   - the read-first of a PUT stays on the primary: a replica behind a
//     replace would answer a retry of the older body as converged.
//
// Every write, every read inside a transaction and every read of the
// claim, lease, fencing and outbox paths goes to the primary.

// bindReplica sets db.replica from cfg.Replica, or from the dbresolver
// plugin registered on db.Gorm, and pins db.Gorm to the primary under
// dbresolver.
func (db *DB) bindReplica(ctx context.Context, cfg Config) error {
	db.replicaTimeout = cfg.ReplicaTimeout
	_, resolver := db.Gorm.Config.Plugins[(&dbresolver.DBResolver{}).Name()]
	if resolver {
		// dbresolver sends a SELECT outside a transaction to a replica
		// unless the statement says Write: every read of the framework
		// through DB.Gorm (a claim's read-first, the relay's checks)
		// must see the primary's last commit.
		db.Gorm = db.Gorm.Clauses(dbresolver.Write).Session(&gorm.Session{})
	}
	switch {
	case cfg.Replica != nil:
		if cfg.Replica.Dialector.Name() != db.Gorm.Dialector.Name() {
			return fmt.Errorf("%w: Config.Replica is a %s connection and the primary a %s one", ErrMisconfigured,
				cfg.Replica.Dialector.Name(), db.Gorm.Dialector.Name())
		}
		sqlDB, err := cfg.Replica.DB()
		if err != nil {
			return fmt.Errorf("store: replica: %w", err)
		}
		if err := sqlDB.PingContext(ctx); err != nil {
			return fmt.Errorf("store: replica: ping: %w", classify(db.Driver, err))
		}
		if _, err := db.Driver.Check(ctx, cfg.Replica); err != nil {
			return fmt.Errorf("store: replica: %w", classify(db.Driver, err))
		}
		db.replica = cfg.Replica.Session(&gorm.Session{})
	case resolver:
		db.replica = db.Gorm.Clauses(dbresolver.Read).Session(&gorm.Session{})
	}
	return nil
}

// Replica returns the handle of reads that may lag behind the primary
// ([Config.Replica], or the replicas of the dbresolver plugin registered
// on the handle given to [New]), or nil when there is none: then every
// read is the primary's. Only reads whose answer a lag cannot make wrong
// may use it: the rules are at the top of this file and in
// docs/scaling.md. [DB.ReadReplica] bounds such a read.
func (db *DB) Replica() *gorm.DB { return db.replica }

// ErrNoReplica is returned by [DB.ReadReplica] when the store has no
// replica.
var ErrNoReplica = errors.New("store: no replica")

// ReadReplica runs read on the replica's handle, with ctx bounded by
// [Config.ReplicaTimeout]. Any error (none configured: [ErrNoReplica]; the
// replica failed, or did not answer in time) means: read the primary.
func (db *DB) ReadReplica(ctx context.Context, read func(ctx context.Context, replica *gorm.DB) error) error {
	if db.replica == nil {
		return ErrNoReplica
	}
	ctx, cancel := context.WithTimeout(ctx, db.replicaTimeout)
	defer cancel()
	return read(ctx, db.replica.WithContext(ctx))
}
