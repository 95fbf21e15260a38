package postkeys

import "errors"

var (
	// ErrFenced is returned by [Run.Phase], [Run.Complete], [Run.Renew] and
	// [Run.RenewFor] when the attempt no longer owns its record: its
	// fencing token is not the record's any more (a newer attempt took it
	// over, or it was released and claimed again, or completed) or its
	// lease ended on the database clock; or, for an operation with
	// [Operation.ClaimInFirstPhase], when the first phase found the key
	// held by another request. Nothing the failed phase wrote was
	// committed. A RunFunc or ReconcileFunc that gets it must stop and
	// return it; the adapter then answers with the other attempt's outcome.
	ErrFenced = errors.New("postkeys: the attempt was fenced off by a newer attempt")

	// ErrAbandoned is returned (wrapped) by [Run.FailPoint] and the adapter's
	// own fail points when [Config.FailPointFunc] fails one. The attempt stops
	// as a crashed process would: its record is left exactly as its last
	// committed transaction left it (in progress with its lease running,
	// for a retry or the recovery worker to find; completed after
	// [Run.Complete]), and the client gets a 500. Only tests set
	// FailPointFunc.
	ErrAbandoned = errors.New("postkeys: the attempt was abandoned at a fail point")

	// ErrKeyTaken is returned (wrapped) by [RecordStore.Create], or by the
	// transaction it deferred its statement to, when a record of the key
	// exists: a concurrent request with the key committed first.
	ErrKeyTaken = errors.New("postkeys: a record of this key exists")

	// ErrRunning is returned by [Adapter.Start] when the workers are already
	// running.
	ErrRunning = errors.New("postkeys: the workers are already running")
)
