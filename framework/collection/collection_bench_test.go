package collection_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// benchCollection is the invoices resource on a fresh database of dialect.
func benchCollection(b *testing.B, dialect string) *collection.Collection[InvoiceCommand, Invoice] {
	b.Helper()
	db, err := store.Open(context.Background(), testdb.New(b, dialect), store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if err := db.Gorm.AutoMigrate(&Invoice{}, &InvoiceLine{}, &InvoiceEvent{}); err != nil {
		b.Fatal(err)
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	col, err := collection.New(engine, invoiceResource(collection.CreateOrReplace))
	if err != nil {
		b.Fatal(err)
	}
	return col
}

var benchCommand = InvoiceCommand{Customer: "cus_1", Lines: []LineCommand{{Text: "a", Amount: 100}, {Text: "b", Amount: 250}}}

// BenchmarkCollectionPutCreate measures Collection.Put of a new ID: the
// read that misses, then the insert, two child rows and the creation-hook
// row in one transaction.
func BenchmarkCollectionPutCreate(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			col := benchCollection(b, dialect)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := col.Put(ctx, collection.PutRequest[InvoiceCommand]{Tenant: "t1", ID: uuid.New(), Command: benchCommand, Header: http.Header{}})
				if err != nil || res.Status != http.StatusCreated {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// BenchmarkCollectionPutReplay measures Collection.Put of the same command
// again: one read, no transaction.
func BenchmarkCollectionPutReplay(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			col := benchCollection(b, dialect)
			ctx := context.Background()
			req := collection.PutRequest[InvoiceCommand]{Tenant: "t1", ID: uuid.New(), Command: benchCommand, Header: http.Header{}}
			if _, err := col.Put(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := col.Put(ctx, req)
				if err != nil || !res.Replayed {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// BenchmarkCollectionGet measures Collection.Get of a resource with child
// rows: one snapshot read of the row and its lines.
func BenchmarkCollectionGet(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			col := benchCollection(b, dialect)
			ctx := context.Background()
			req := collection.PutRequest[InvoiceCommand]{Tenant: "t1", ID: uuid.New(), Command: benchCommand, Header: http.Header{}}
			if _, err := col.Put(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := col.Get(ctx, req.Tenant, req.ID)
				if err != nil || res.Status != http.StatusOK {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}
