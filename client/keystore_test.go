package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/client"
)

// testKeyStore is the contract every client.KeyStore must pass.
func testKeyStore(t *testing.T, newStore func(t *testing.T) client.KeyStore) {
	t.Helper()
	ctx := context.Background()

	t.Run("missing key", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if _, err := s.Load(ctx, "nope"); !errors.Is(err, client.ErrKeyNotFound) {
			t.Fatalf("Load of a missing key: err = %v, want ErrKeyNotFound", err)
		}
		if err := s.Delete(ctx, "nope"); err != nil {
			t.Fatalf("Delete of a missing key: %v", err)
		}
	})

	t.Run("save load overwrite delete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		saved := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		for _, op := range []string{"charge-order-1042", "../../etc/passwd", "", "ünïcode / spaces"} {
			if err := s.Save(ctx, op, client.StoredKey{Key: "k1"}); err != nil {
				t.Fatalf("Save(%q): %v", op, err)
			}
			if err := s.Save(ctx, op, client.StoredKey{Key: "k2", SavedAt: saved}); err != nil {
				t.Fatalf("Save(%q) again: %v", op, err)
			}
			if got, err := s.Load(ctx, op); err != nil || got.Key != "k2" || !got.SavedAt.Equal(saved) {
				t.Fatalf("Load(%q) = %+v, %v; want k2 saved at %v", op, got, err, saved)
			}
			if err := s.Delete(ctx, op); err != nil {
				t.Fatalf("Delete(%q): %v", op, err)
			}
			if _, err := s.Load(ctx, op); !errors.Is(err, client.ErrKeyNotFound) {
				t.Fatalf("Load(%q) after Delete: err = %v, want ErrKeyNotFound", op, err)
			}
		}
	})

	t.Run("operations are independent and concurrent-safe", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				op, key := fmt.Sprintf("op-%d", i), fmt.Sprintf("key-%d", i)
				if err := s.Save(ctx, op, client.StoredKey{Key: key}); err != nil {
					t.Errorf("Save(%s): %v", op, err)
				}
			})
		}
		wg.Wait()
		for i := range 20 {
			if got, err := s.Load(ctx, fmt.Sprintf("op-%d", i)); err != nil || got.Key != fmt.Sprintf("key-%d", i) {
				t.Fatalf("Load(op-%d) = %q, %v", i, got, err)
			}
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Save(cctx, "op", client.StoredKey{Key: "k"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Save with a cancelled context: err = %v", err)
		}
	})
}

func TestFileKeyStore(t *testing.T) {
	t.Parallel()
	testKeyStore(t, func(t *testing.T) client.KeyStore {
		s, err := client.NewFileKeyStore(filepath.Join(t.TempDir(), "keys"))
		if err != nil {
			t.Fatalf("NewFileKeyStore: %v", err)
		}
		return s
	})
}

func TestFileKeyStoreLeavesNoTempFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := client.NewFileKeyStore(dir)
	if err != nil {
		t.Fatalf("NewFileKeyStore: %v", err)
	}
	for i := range 5 {
		if err := s.Save(t.Context(), "op", client.StoredKey{Key: fmt.Sprint("k", i)}); err != nil {
			t.Fatalf("Save: %v", err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	if len(entries) != 1 || filepath.Ext(entries[0].Name()) != ".json" {
		t.Fatalf("directory holds %v, want one .json file", entries)
	}
	if _, err := client.NewFileKeyStore(""); !errors.Is(err, client.ErrInvalidConfig) {
		t.Fatalf("NewFileKeyStore(\"\"): err = %v, want ErrInvalidConfig", err)
	}
}

// TestRestartReusesPersistedKey: a process sends a payment, loses the
// answer and dies; a new process with the same file KeyStore resumes the
// operation with the same key and gets the original result as a replay.
func TestRestartReusesPersistedKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newClient := func(env *testEnv) *client.Client {
		store, err := client.NewFileKeyStore(dir)
		if err != nil {
			t.Fatalf("NewFileKeyStore: %v", err)
		}
		cfg := env.cfg
		cfg.KeyStore = store
		cfg.MaxAttempts = 1 // the first process gives up (dies) after one try
		c, err := client.New(env.api.srv.URL, &cfg)
		if err != nil {
			t.Fatalf("client.New: %v", err)
		}
		return c
	}
	env := setup(t, nil)
	env.api.setPlan(faults(dropAfterCommit))
	const op = "charge-order-1042"

	first := newClient(env)
	_, err := first.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Operation: op, Body: paymentBody})
	e := asError(t, err)
	if e.OutcomeKnown || e.Key == "" {
		t.Fatalf("first process: err = %v, want an unknown outcome", err)
	}

	second := newClient(env) // the "restarted" process
	res, err := second.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Operation: op, Body: paymentBody})
	if err != nil {
		t.Fatalf("second process: %v", err)
	}
	if res.Key != e.Key || !res.Replayed {
		t.Fatalf("second process used key %q (replayed %t), want %q replayed", res.Key, res.Replayed, e.Key)
	}
	_, keys, effects := env.api.stats()
	if len(keys) != 2 || keys[0] != keys[1] || effects[e.Key] != 1 || len(effects) != 1 {
		t.Fatalf("keys = %v, effects = %v; want two requests with one key and one effect", keys, effects)
	}
	if orig := env.api.answer(e.Key); string(res.Body) != string(orig.body) {
		t.Fatalf("got %s, want the original %s", res.Body, orig.body)
	}

	// Once the outcome is recorded, Forget frees the operation name: the
	// next run is a new logical operation with a new key.
	if err := second.Forget(t.Context(), op); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	env.api.setPlan(faults())
	again, err := second.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Operation: op, Body: paymentBody})
	if err != nil {
		t.Fatalf("Post after Forget: %v", err)
	}
	if again.Key == e.Key || again.Replayed {
		t.Fatalf("Post after Forget reused key %q (replayed %t)", again.Key, again.Replayed)
	}
}

func TestRestartReusesPersistedID(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	env.api.setPlan(faults(dropAfterCommit))
	store, err := client.NewFileKeyStore(t.TempDir())
	if err != nil {
		t.Fatalf("NewFileKeyStore: %v", err)
	}
	newClient := func(maxAttempts int) *client.Client {
		cfg := env.cfg
		cfg.KeyStore, cfg.MaxAttempts = store, maxAttempts
		c, err := client.New(env.api.srv.URL, &cfg)
		if err != nil {
			t.Fatalf("client.New: %v", err)
		}
		return c
	}
	req := client.CreateRequest{Collection: "/v1/orders", Operation: "import-row-17", Body: orderBody}

	_, err = newClient(1).Create(t.Context(), req)
	e := asError(t, err)
	res, err := newClient(5).Create(t.Context(), req)
	if err != nil {
		t.Fatalf("Create after restart: %v", err)
	}
	if res.ID.String() != e.ID || !res.Replayed {
		t.Fatalf("restart used ID %s (replayed %t), want %s replayed", res.ID, res.Replayed, e.ID)
	}
	if _, _, effects := env.api.stats(); effects[e.ID] != 1 || len(effects) != 1 {
		t.Fatalf("effects = %v, want one", effects)
	}

	// An explicit ID that disagrees with the stored one is refused.
	req.ID = res.ID
	req.ID[15] ^= 1
	if _, err := newClient(5).Create(t.Context(), req); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("conflicting ID: err = %v, want ErrInvalidRequest", err)
	}
}

// failingStore is a KeyStore whose Save fails.
type failingStore struct{ client.KeyStore }

func (failingStore) Load(context.Context, string) (client.StoredKey, error) {
	return client.StoredKey{}, client.ErrKeyNotFound
}
func (failingStore) Save(context.Context, string, client.StoredKey) error {
	return errors.New("disk full")
}

func TestKeyNotSavedMeansNothingSent(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) { c.KeyStore = failingStore{} })
	_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Operation: "op", Body: paymentBody})
	if err == nil {
		t.Fatal("Post succeeded although the key could not be saved")
	}
	if requests, _, _ := env.api.stats(); requests != 0 {
		t.Fatalf("server saw %d requests, want 0", requests)
	}
}
