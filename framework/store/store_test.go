package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite"
)

// TestOpenRejectsUnknownDSN: a DSN no registered driver takes, and one its
// driver cannot use, fail with ErrUnknownDSN and nothing opened.
func TestOpenRejectsUnknownDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"", "oracle://x", "sqlite:"} {
		if _, err := store.Open(context.Background(), dsn, store.Config{}); !errors.Is(err, store.ErrUnknownDSN) {
			t.Fatalf("Open(%q) = %v, want ErrUnknownDSN", dsn, err)
		}
	}
}
