package postkeys

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/failpoint"
)

// RecoverStats counts what one recovery run did.
type RecoverStats struct {
	// Completed records were settled by the reconcile hook (a response or a
	// stored rejection).
	Completed int
	// Released records had expired leases at [PointStarted]: nothing had
	// happened, so the key is free again.
	Released int
	// Unknown records are still unknown after their reconcile hook ran.
	Unknown int
	// Skipped records belonged to another attempt by the time they were
	// looked at, or to an operation this adapter does not know.
	Skipped int
}

// RecoverOnce runs the recovery worker once: it takes over (atomically, so
// one taker wins) up to Config.RecoveryBatchSize records that are
// in_progress past their lease or unknown. One at [PointStarted] is
// released; any other is settled by its operation's ReconcileFunc. It
// refreshes the gauges at the end.
func (a *Adapter) RecoverOnce(ctx context.Context) (RecoverStats, error) {
	var stats RecoverStats
	recs, err := a.records.ListUnfinished(ctx, a.db.Gorm, &store.RecordListUnfinishedParams{Limit: a.cfg.RecoveryBatchSize})
	if err != nil {
		return stats, a.db.Classify(err)
	}
	var errs []error
	for _, rec := range recs {
		op := a.operation(rec.ID.Operation)
		if op == nil || op.mode != Phased {
			stats.Skipped++
			continue
		}
		at := &attempt{a: a, op: op, id: rec.ID, fingerprint: rec.Fingerprint,
			recorded: true, seed: rec.ID.Key, start: time.Now()}
		ok, err := a.takeover(ctx, at, rec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			stats.Skipped++
			continue
		}
		if at.point == PointStarted && rec.State == store.RecordInProgress {
			var released bool
			err := a.db.Write(ctx, func(tx *gorm.DB) error {
				var err error
				released, err = a.records.Release(ctx, tx, &store.RecordReleaseParams{ID: at.id, Fence: at.fence, Point: PointStarted})
				return err
			})
			switch {
			case err != nil:
				errs = append(errs, err)
			case released:
				stats.Released++
				a.logTransition(ctx, at, "released", stateReleased, 0, false)
			default:
				stats.Skipped++
			}
			continue
		}
		resp, err := op.reconcile(ctx, at)
		_, err = a.finish(ctx, op, at, resp, err, true)
		switch {
		case err == nil:
			stats.Completed++
		case errors.Is(err, framework.ErrOutcomePending):
			stats.Unknown++
		case errors.Is(err, framework.ErrRequestInProgress), errors.Is(err, failpoint.ErrAbandoned):
			stats.Skipped++
		default:
			errs = append(errs, err)
		}
	}
	if err := a.refreshGauges(ctx); err != nil {
		errs = append(errs, err)
	}
	return stats, errors.Join(errs...)
}

func (a *Adapter) refreshGauges(ctx context.Context) error {
	stats, err := a.records.Stats(ctx, a.db.Gorm)
	if err != nil {
		return a.db.Classify(err)
	}
	a.oldestInProgress.Set(stats.OldestInProgress.Seconds())
	a.unknownRecords.Set(float64(stats.Unknown))
	return nil
}

// CleanupStats counts what one janitor run did.
type CleanupStats struct {
	Deleted int64
	// Batches is the number of DELETE statements run.
	Batches int
}

// CleanupOnce runs the janitor once: it deletes completed records past
// expires_at in batches of Config.CleanupBatchSize, one statement each,
// until none is left. It never deletes in_progress or unknown records.
func (a *Adapter) CleanupOnce(ctx context.Context) (CleanupStats, error) {
	stats, err := cleanup(ctx, a.db, a.records, a.cfg.CleanupBatchSize, nil)
	if stats.Deleted > 0 {
		a.logger.LogAttrs(ctx, slog.LevelInfo, "idempotency records expired",
			slog.Int64("deleted", stats.Deleted), slog.Int("batches", stats.Batches))
	}
	return stats, err
}

// Cleanup is the janitor without an adapter, for an operator's tooling:
// it deletes the completed records of db past expires_at in batches of
// batchSize (one statement and one transaction each) until none is left,
// and calls onBatch, when not nil, with each batch's count. It never
// deletes in_progress or unknown records.
func Cleanup(ctx context.Context, db *store.DB, batchSize int, onBatch func(deleted int64)) (CleanupStats, error) {
	if db == nil {
		return CleanupStats{}, errors.New("postkeys: Cleanup needs a database")
	}
	return cleanup(ctx, db, db.Driver.Records(), batchSize, onBatch)
}

// cleanup is [Cleanup] with the statements of records.
func cleanup(ctx context.Context, db *store.DB, records store.Records, batchSize int, onBatch func(deleted int64)) (CleanupStats, error) {
	var stats CleanupStats
	if batchSize <= 0 {
		return stats, errors.New("postkeys: Cleanup needs a positive batch size")
	}
	batch := &store.RecordDeleteExpiredParams{Limit: batchSize}
	for ctx.Err() == nil {
		var n int64
		err := db.Write(ctx, func(tx *gorm.DB) error {
			var err error
			n, err = records.DeleteExpired(ctx, tx, batch)
			return err
		})
		if err != nil {
			return stats, err
		}
		stats.Batches++
		stats.Deleted += n
		if onBatch != nil {
			onBatch(n)
		}
		if n < int64(batchSize) {
			break
		}
	}
	return stats, ctx.Err()
}

// Start runs the recovery worker and the janitor in one goroutine, every
// Config.RecoveryInterval and Config.CleanupInterval, until ctx ends or
// [Adapter.Stop] is called; the gauges are refreshed and the operations
// published ([Adapter.PublishOperations], again at every recovery round
// until that succeeds) at once. It returns [ErrRunning] if they already
// run.
func (a *Adapter) Start(ctx context.Context) error {
	a.workerMu.Lock()
	defer a.workerMu.Unlock()
	if a.cancel != nil {
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	a.cancel, a.done = cancel, done
	go func() {
		defer close(done)
		a.work(ctx)
	}()
	return nil
}

// Stop stops the workers and waits until they have returned. It is safe to
// call when they do not run, and more than once.
func (a *Adapter) Stop() {
	a.workerMu.Lock()
	cancel, done := a.cancel, a.done
	a.cancel, a.done = nil, nil
	a.workerMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (a *Adapter) work(ctx context.Context) {
	recovery := time.NewTicker(a.cfg.RecoveryInterval)
	defer recovery.Stop()
	cleanup := time.NewTicker(a.cfg.CleanupInterval)
	defer cleanup.Stop()
	// Each round gets a deadline, as every request does, so that a silent
	// database cannot hold the worker: the next round starts afresh.
	round := func(name string, fn func(context.Context) error) {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.LeaseDuration)
		defer cancel()
		if err := fn(rctx); err != nil && ctx.Err() == nil {
			a.logger.LogAttrs(ctx, slog.LevelWarn, name, slog.String("error", store.RedactError(err)))
		}
	}
	published := false
	publish := func() {
		if !published {
			round("idempotency operations not published", func(ctx context.Context) error {
				err := a.PublishOperations(ctx)
				published = err == nil
				return err
			})
		}
	}
	publish()
	round("idempotency gauges not refreshed", a.refreshGauges)
	for {
		select {
		case <-ctx.Done():
			return
		case <-recovery.C:
			publish()
			round("idempotency recovery failed", func(ctx context.Context) error { _, err := a.RecoverOnce(ctx); return err })
		case <-cleanup.C:
			round("idempotency cleanup failed", func(ctx context.Context) error { _, err := a.CleanupOnce(ctx); return err })
		}
	}
}
