// Package failpoint lets the framework's tests, and the demo's fault
// flags, pause an attempt of the POST fallback (fallback/postkeys) or end
// it as a crash would, at named points between two of its transactions.
//
// A [Func] travels in the context of the attempt ([With], or [Handler]
// for every request of a server): no Config of the framework carries one,
// and an application, which cannot import this package, never has one.
// An attempt reaches a point with [Reach]: the adapter's own points
// ([AfterClaim], [AfterPhase] and the recovery point, [BeforeComplete])
// and those an operation names itself (resources/payments' after_charge).
//
// Every point lies between two transactions of the attempt, never inside
// one: a Func can pause the attempt there or abandon it ([ErrAbandoned]),
// and the attempt commits the same transactions, with the same
// statements, whether a Func is set or not
// (postkeys' TestFailPointsKeepTheTransactions,
// tests' TestPaymentFailPointsKeepTheCommits). The window a point opens is
// therefore one production has.
package failpoint
