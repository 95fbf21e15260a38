package postkeys

// ReplayCacheStats is the replay cache's [framework.ReplayCache.Stats] of
// the operation named op.
func ReplayCacheStats(a *Adapter, op string) (entries int, answered, rebound int64) {
	return a.operation(op).replays.Stats()
}
