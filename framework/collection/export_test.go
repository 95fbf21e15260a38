package collection

// ReplayCacheStats reports how many commands c's replay cache holds, how
// many requests it answered and how many it sent back to the bind because
// their row asked for a write.
func ReplayCacheStats[Cmd, Model any](c *Collection[Cmd, Model]) (entries int, hits, fallbacks int64) {
	if c.replays == nil {
		return 0, 0, 0
	}
	return c.replays.entries.Len(), c.replays.hits.Load(), c.replays.fallbacks.Load()
}
