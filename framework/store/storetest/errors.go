package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testErrors: the driver's Classify names what the framework decides on.
// A duplicate primary key and a duplicate unique column are
// ErrUniqueViolation, through Write as through Classify; a text the
// database cannot store is ErrUnstorableText or is stored exactly (never
// truncated or changed); an ended deadline is ErrUnavailable; anything
// else is passed through unchanged.
func testErrors(t *testing.T, h Harness) {
	ctx := context.Background()
	db := open(t, h, store.Config{})
	if err := db.Gorm.Exec("CREATE TABLE u (k VARCHAR(64) PRIMARY KEY, name VARCHAR(64) UNIQUE, note TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	insert := func(k, name, note string) error {
		return db.Write(ctx, func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO u (k, name, note) VALUES (?, ?, ?)", k, name, note).Error
		})
	}
	if err := insert("a", "alice", ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, k, n string }{{"primary key", "a", "bob"}, {"unique column", "b", "alice"}} {
		err := insert(tc.k, tc.n, "")
		if !errors.Is(err, store.ErrUniqueViolation) {
			t.Errorf("a duplicate %s = %v, want ErrUniqueViolation", tc.name, err)
		}
		if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrLockTimeout) {
			t.Errorf("a duplicate %s is also classified as an outage or lock timeout: %v", tc.name, err)
		}
	}
	for i, text := range []string{"nul\x00byte", "bad\xffutf8", "surrogate\xed\xa0\x80half"} {
		k := fmt.Sprintf("t%d", i)
		err := insert(k, k, text)
		if err != nil {
			if !errors.Is(err, store.ErrUnstorableText) {
				t.Errorf("a text %q refused with %v, want ErrUnstorableText", text, err)
			}
			var n int64
			if err := db.Gorm.Table("u").Where("k = ?", k).Count(&n).Error; err != nil || n != 0 {
				t.Errorf("a refused text left %d rows (%v)", n, err)
			}
			continue
		}
		var got string
		if err := db.Gorm.Raw("SELECT note FROM u WHERE k = ?", k).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if got != text {
			t.Errorf("a text %q was stored as %q: refuse it (ErrUnstorableText) or store it exactly", text, got)
		}
	}
	deadline := fmt.Errorf("query: %w", context.DeadlineExceeded)
	if err := db.Classify(deadline); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Classify(a deadline) = %v, want ErrUnavailable", err)
	}
	plain := errors.New("plain")
	if err := db.Classify(plain); err != plain {
		t.Errorf("Classify(a plain error) = %v, want it unchanged", err)
	}
}
