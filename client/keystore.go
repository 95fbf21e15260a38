package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// KeyStore persists the idempotency key (or, for [Client.Create], the
// resource ID) of a logical operation, so that a process that restarts in
// the middle of it sends the same key again and gets the original result
// instead of a second effect. The client saves the key before the first
// request is sent. Operations are caller-chosen names such as
// "charge-order-1042".
//
// One logical operation is driven by one process at a time; a KeyStore
// need not arbitrate two processes racing on the same operation name.
// Implementations must be safe for concurrent use on different operations.
type KeyStore interface {
	// Load returns the key stored for operation, or an error wrapping
	// [ErrKeyNotFound] when there is none.
	Load(ctx context.Context, operation string) (StoredKey, error)

	// Save stores key for operation, replacing any previous one. When it
	// returns nil the key must survive a crash of the process.
	Save(ctx context.Context, operation string, key StoredKey) error

	// Delete forgets the key of operation. Deleting a missing key is not
	// an error.
	Delete(ctx context.Context, operation string) error
}

// StoredKey is what a [KeyStore] keeps per operation.
type StoredKey struct {
	// Key is the idempotency key, or the resource ID of [Client.Create].
	Key string

	// SavedAt is when the client saved the key, before its first request,
	// on [Config.NowFunc]'s clock. [Client.Post] compares it with
	// [Config.ReplayWindow]; a zero SavedAt (a store that does not keep
	// it) is never considered expired.
	SavedAt time.Time
}

var _ KeyStore = (*FileKeyStore)(nil)

// FileKeyStore is a [KeyStore] keeping one small JSON file per operation in
// a directory. Writes go to a temporary file that is synced and renamed over
// the final name, so a reader sees either the old key or the new one, never
// a torn file. File names are the SHA-256 of the operation name, so any
// name is safe.
type FileKeyStore struct {
	dir string
}

// fileKeyRecord is the content of one FileKeyStore file.
type fileKeyRecord struct {
	Operation string    `json:"operation"`
	Key       string    `json:"key"`
	SavedAt   time.Time `json:"saved_at"`
}

// NewFileKeyStore returns a FileKeyStore keeping its files in dir, which
// it creates (mode 0700) if missing.
func NewFileKeyStore(dir string) (*FileKeyStore, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: NewFileKeyStore: empty directory", ErrInvalidConfig)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("client: create key store directory: %w", err)
	}
	return &FileKeyStore{dir: dir}, nil
}

func (s *FileKeyStore) path(operation string) string {
	sum := sha256.Sum256([]byte(operation))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".json")
}

// Load implements [KeyStore].
func (s *FileKeyStore) Load(ctx context.Context, operation string) (StoredKey, error) {
	if err := ctx.Err(); err != nil {
		return StoredKey{}, err
	}
	data, err := os.ReadFile(s.path(operation))
	if errors.Is(err, fs.ErrNotExist) {
		return StoredKey{}, fmt.Errorf("%w: %q", ErrKeyNotFound, operation)
	}
	if err != nil {
		return StoredKey{}, fmt.Errorf("client: load key: %w", err)
	}
	var rec fileKeyRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return StoredKey{}, fmt.Errorf("client: load key for %q: corrupt file: %w", operation, err)
	}
	if rec.Operation != operation {
		return StoredKey{}, fmt.Errorf("client: load key: file holds operation %q, want %q", rec.Operation, operation)
	}
	return StoredKey{Key: rec.Key, SavedAt: rec.SavedAt}, nil
}

// Save implements [KeyStore]: temporary file, fsync, rename, fsync of the
// directory.
func (s *FileKeyStore) Save(ctx context.Context, operation string, key StoredKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := json.Marshal(fileKeyRecord{Operation: operation, Key: key.Key, SavedAt: key.SavedAt.UTC()})
	if err != nil {
		return fmt.Errorf("client: save key: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("client: save key: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("client: save key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("client: save key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("client: save key: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path(operation)); err != nil {
		return fmt.Errorf("client: save key: %w", err)
	}
	committed = true
	return s.syncDir()
}

// Delete implements [KeyStore].
func (s *FileKeyStore) Delete(ctx context.Context, operation string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.Remove(s.path(operation))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("client: delete key: %w", err)
	}
	return s.syncDir()
}

// syncDir makes a rename or removal in the directory durable.
func (s *FileKeyStore) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("client: sync key store directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("client: sync key store directory: %w", err)
	}
	return nil
}
