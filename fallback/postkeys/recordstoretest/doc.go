// Package recordstoretest is the contract suite of postkeys.RecordStore:
// what any implementation, on any dialect, must do. Run it from a test of
// the implementation:
//
//	func TestRecordStoreContract(t *testing.T) {
//		recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
//			// an empty database with migrations.Up applied, and a store on it
//			// whose clock offset the harness moves
//		})
//	}
//
// It covers the claim (insert and its conflict), takeover, fencing, lease
// expiry on the database clock, the stall cases (woken after a takeover, a
// release and re-claim, or the end of its own lease), the completion (with
// and without the last phase's recovery point), expiry and reclaim,
// the janitor, lock timeouts and error classification.
package recordstoretest
