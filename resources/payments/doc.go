// Package payments is the example resource on the POST fallback in phased
// mode: a payment whose charge ID is assigned by a third party, the
// [Provider].
//
// The package root holds the domain: [Charge], [ChargeRequest], the
// [Provider] interface every payment provider implements, and the payment
// methods the demo accepts. Package sandbox implements [Provider] for tests
// and the demo.
package payments
