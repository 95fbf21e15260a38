package collection

// InsertFirstCounts reports how many of c's PUTs created by inserting
// first, and how many found the ID taken when they did.
func InsertFirstCounts[Cmd, Model any](c *Collection[Cmd, Model]) (inserted, conflicts int64) {
	return c.first.inserted.Load(), c.first.conflicts.Load()
}
