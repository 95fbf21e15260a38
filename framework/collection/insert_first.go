package collection

import "sync/atomic"

// insertFirst is when a PUT inserts before it reads. A create that reads
// first costs a round trip more than one that inserts first; a PUT that
// finds its ID taken (a replace, or a retry this process has not
// replayed) costs a refused INSERT more when it inserts first. So a PUT
// inserts first while fewer than half of the PUTs the collection served
// lately found their row: taken is a moving average, over about the last
// sixteen PUTs without If-Match and not answered from the replay cache,
// of whether each one's row existed, as its refused INSERT or its read
// told. Under read-first, the reads keep telling, so that a run of
// creates opens it again.
type insertFirst struct {
	// enabled: the resource does not say ReadFirst.
	enabled bool
	// taken is the moving average, in units of 1/takenOne.
	taken atomic.Int64
}

// takenOne is the fixed-point 1 of insertFirst.taken; takenWeight the
// weight of the newest PUT, 1/16.
const (
	takenOne    = 1 << 16
	takenWeight = 4 // a shift
)

// open reports that the next PUT should insert first.
func (f *insertFirst) open() bool { return f.enabled && f.taken.Load() < takenOne/2 }

// saw moves the average towards whether a PUT found its row.
func (f *insertFirst) saw(taken bool) {
	target := int64(0)
	if taken {
		target = takenOne
	}
	for {
		old := f.taken.Load()
		next := old + (target-old)>>takenWeight
		if next == old && old != target {
			next = target // the last steps of the shift round to nothing
		}
		if f.taken.CompareAndSwap(old, next) {
			return
		}
	}
}
