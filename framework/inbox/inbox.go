package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Defaults of [Config].
const (
	DefaultRetention        = 7 * 24 * time.Hour
	DefaultCleanupBatchSize = 1000
)

// Config tunes [New]. The zero value is ready to use.
type Config struct {
	// Retention is how long a processed message's row is kept. Defaults to
	// 7 days.
	Retention time.Duration
	// CleanupBatchSize bounds the rows one cleanup DELETE removes. Defaults
	// to 1000.
	CleanupBatchSize int
	// Registerer receives retrysafe_inbox_duplicates_total (by consumer).
	// Defaults to none.
	Registerer prometheus.Registerer
	// Now is the clock of received_at and retention. Defaults to time.Now.
	Now func() time.Time
}

// Inbox records the messages consumers have processed.
type Inbox struct {
	db         *store.DB
	cfg        Config
	duplicates *prometheus.CounterVec
}

// New returns an inbox on db, whose framework migrations must be applied.
func New(db *store.DB, cfg Config) (*Inbox, error) {
	if db == nil {
		return nil, errors.New("inbox: New needs a database")
	}
	if cfg.Retention < 0 || cfg.CleanupBatchSize < 0 {
		return nil, errors.New("inbox: Config durations and sizes must not be negative")
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.CleanupBatchSize == 0 {
		cfg.CleanupBatchSize = DefaultCleanupBatchSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	in := &Inbox{db: db, cfg: cfg, duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "retrysafe", Subsystem: "inbox", Name: "duplicates_total",
		Help: "Messages dropped by a consumer's inbox because they had been processed already.",
	}, []string{"consumer"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(in.duplicates); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
			in.duplicates = already.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return in, nil
}

// Process runs fn in one transaction with the inbox row of (consumer,
// messageID). It returns duplicate = true, without calling fn, when the
// message was processed before; otherwise fn's writes and the row commit
// together, or neither does and the error is returned (errors pass through
// [store.DB.Classify]). Process is the transactional twin of nothing else: pass
// every write of the effect through fn's tx.
func (in *Inbox) Process(ctx context.Context, consumer, messageID string, fn func(tx *gorm.DB) error) (duplicate bool, err error) {
	if consumer == "" || messageID == "" {
		return false, ErrNoMessageID
	}
	err = in.db.Write(ctx, func(tx *gorm.DB) error {
		// gorm spells "insert unless the key is there" for each database
		// (ON CONFLICT DO NOTHING, or MySQL's ON DUPLICATE KEY UPDATE with
		// a no-op assignment); either way a duplicate affects no row.
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).
			Create(&messageRow{Consumer: consumer, MessageID: messageID, ReceivedAt: in.cfg.Now().UTC()})
		if res.Error != nil {
			return fmt.Errorf("inbox: record %s: %w", consumer, res.Error)
		}
		if res.RowsAffected == 0 {
			duplicate = true
			return nil
		}
		return fn(tx)
	})
	if err != nil {
		return false, err
	}
	if duplicate {
		in.duplicates.WithLabelValues(consumer).Inc()
	}
	return duplicate, nil
}

// Duplicates returns how many duplicates consumer dropped in this process.
func (in *Inbox) Duplicates(consumer string) prometheus.Counter {
	return in.duplicates.WithLabelValues(consumer)
}

// CleanupOnce deletes rows older than Config.Retention in batches, one
// statement each, and returns how many it deleted.
func (in *Inbox) CleanupOnce(ctx context.Context) (int64, error) {
	cutoff := in.cfg.Now().Add(-in.cfg.Retention).UTC()
	var total int64
	for ctx.Err() == nil {
		// The batch is a derived table inside IN: MySQL refuses LIMIT in
		// an IN subquery and a subquery on the table being deleted from,
		// but not a derived table, which every database here reads alike.
		res := in.db.Gorm.WithContext(ctx).Exec(`DELETE FROM inbox_messages WHERE received_at < ? AND message_id IN (
  SELECT message_id FROM (SELECT message_id FROM inbox_messages WHERE received_at < ? ORDER BY received_at LIMIT ?) batch)`,
			cutoff, cutoff, in.cfg.CleanupBatchSize)
		if res.Error != nil {
			return total, in.db.Classify(res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(in.cfg.CleanupBatchSize) {
			break
		}
	}
	return total, ctx.Err()
}

// messageRow is a row of inbox_messages.
type messageRow struct {
	Consumer   string    `gorm:"column:consumer;primaryKey"`
	MessageID  string    `gorm:"column:message_id;primaryKey"`
	ReceivedAt time.Time `gorm:"column:received_at"`
}

func (messageRow) TableName() string { return "inbox_messages" }
