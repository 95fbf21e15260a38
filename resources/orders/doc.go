// Package orders is the example resource of the PUT pattern: a client picks
// the order's UUID and PUTs it; a retry converges, a different body replaces
// the order while it is a draft, and a submitted order is locked (409
// resource_locked).
//
// [Resource] is the whole declaration: the [Command] with its validation, the
// [Render] function, the replace guard and the creation hook that writes one
// order.created [Event] to the order_events audit table and one to the
// framework's outbox ([EmitCreated]) in the insert's transaction.
// [EmitReplaced] and [EmitSubmitted] write order.replaced and
// order.submitted for the engine's replace and status hooks. [New] builds
// the collection; [Orders.Mount] adds POST /orders/{id}/submit beside the
// engine's routes.
package orders
