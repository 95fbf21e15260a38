package collection

// ReplayCacheStats is c's replay cache's [framework.ReplayCache.Stats].
func ReplayCacheStats[Cmd, Model any](c *Collection[Cmd, Model]) (entries int, answered, rebound int64) {
	return c.replays.Stats()
}
