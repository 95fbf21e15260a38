package postkeys

import "github.com/retrysafe/retrysafe/framework/store"

// WrapRecords replaces the record statements a runs by wrap of them (a
// test's spy on them).
func WrapRecords(a *Adapter, wrap func(store.Records) store.Records) { a.records = wrap(a.records) }
