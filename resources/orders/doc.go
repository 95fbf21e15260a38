// Package orders is the example resource of the PUT pattern: a client picks
// the order's UUID and PUTs it; a retry converges, a different body replaces
// the order while it is a draft, and a submitted order is locked (409
// resource_locked).
//
// [Resource] is the whole declaration: the [Command] with its validation,
// the typed gorm model [Order] (customer, currency, note, total_cents) with
// its [OrderItem] child rows (quantity, unit_price_cents) in order_items,
// the mapping of one onto the other, the [Render] function (prices stay
// decimal strings on the wire), the replace guard, the list filters
// (status, customer) and the write hooks that put order.created,
// order.replaced and order.submitted in the framework's outbox in the
// transaction of the change, only when it happened. [New] builds the
// collection; [Orders.Mount] adds POST /orders/{id}/submit beside the
// engine's routes. The tables are resources/schema's 00001_orders.
package orders
