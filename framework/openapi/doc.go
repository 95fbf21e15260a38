// Package openapi generates an OpenAPI 3.1 description of a retrysafe API
// from what is mounted, using github.com/getkin/kin-openapi, or the same
// description in OpenAPI 3.0 ([Config.OpenAPI]) for tools that read 3.0
// only.
//
// It reads descriptions, never internals: collections
// ([collection.Collection.Describe]), the legacy POST route, POST fallback
// operations and resources' own routes return
// [framework.RouteDescription] values, and [New] turns them into a
// validated [Document]:
//
//	doc, err := openapi.New(openapi.Config{Title: "Orders API", Version: "1"},
//		slices.Concat(orders.Describe(), transfers.Describe())...)
//	router.GET("/openapi.json", gin.WrapH(doc))
//
// The document covers request schemas from the typed commands and their
// validate tags (required fields, lengths, bounds, enums; custom rules are
// named in the field's description), closed response schemas, the
// Idempotency-Key, If-Match and If-None-Match request headers, the ETag,
// Location, Idempotent-Replayed and Retry-After response headers, every
// problem answer with its status and the enum of its codes, and each
// operation's replay window (in its description and in the
// x-retrysafe-replay-window-seconds extension).
//
// A body of a named Go type is a component named by the type's name
// ("Command"), qualified by its package's name only where two types share
// it ("orders.Command", "payments.Command").
//
// [Config] also sets the document's servers (by default one, "/":
// relative to where it is served; a server may carry the path prefix the
// routes are mounted under, whether or not their paths name it too, see
// [Config.Servers]), [License], [Contact] and terms of
// service; an operation without a summary is summarized by its ID. The
// document, 3.1 or 3.0, passes Redocly CLI's recommended rules
// (redocly lint --extends recommended); with no License it warns
// info-license.
//
// The 3.0 document is the 3.1 one rewritten in 3.0's spelling after it is
// generated (one generator, one description): a type list with "null"
// becomes nullable: true, and a license's SPDX identifier its URL. The
// generator writes nothing else that 3.0 cannot say, and kin-openapi's
// validation of the result, which [New] runs, would refuse it.
package openapi
