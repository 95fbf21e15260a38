package storetest

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testSnapshot: ReadSnapshot reads a row and its child rows in one go and
// reports each query's result as gorm would (ErrRecordNotFound for an
// empty Take), and refuses a transaction (ErrNoSnapshot).
func testSnapshot(t *testing.T, h Harness) {
	ctx := context.Background()
	db := open(t, h, store.Config{})
	for _, q := range []string{
		"CREATE TABLE parents (id INTEGER PRIMARY KEY, name VARCHAR(32) NOT NULL)",
		"CREATE TABLE children (parent_id INTEGER NOT NULL, n INTEGER NOT NULL)",
		"INSERT INTO parents VALUES (1, 'p')",
		"INSERT INTO children VALUES (1, 1), (1, 2), (1, 3)",
	} {
		if err := db.Gorm.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	type parent struct {
		ID   int
		Name string
	}
	type child struct {
		ParentID int
		N        int
	}
	var p, missing parent
	var kids []child
	res, err := store.ReadSnapshot(ctx, db.Driver, db.Gorm,
		func(q *gorm.DB) *gorm.DB { return q.Table("parents").Where("id = ?", 1).Take(&p) },
		func(q *gorm.DB) *gorm.DB { return q.Table("children").Where("parent_id = ?", 1).Order("n").Find(&kids) },
		func(q *gorm.DB) *gorm.DB { return q.Table("parents").Where("id = ?", 2).Take(&missing) })
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "p" || len(kids) != 3 || kids[2].N != 3 {
		t.Fatalf("read %+v and %+v", p, kids)
	}
	if res[1].RowsAffected != 3 || !errors.Is(res[2].Error, gorm.ErrRecordNotFound) {
		t.Fatalf("results: %d rows, a missing row's error %v", res[1].RowsAffected, res[2].Error)
	}
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		_, err := store.ReadSnapshot(ctx, db.Driver, tx, func(q *gorm.DB) *gorm.DB { return q.Table("parents").Take(&p) })
		if !errors.Is(err, store.ErrNoSnapshot) {
			t.Errorf("ReadSnapshot in a transaction = %v, want ErrNoSnapshot", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
