// Package reference serves an API reference page for a retrysafe service:
// Swagger UI rendering the service's own OpenAPI document
// ([openapi.Document]), with every operation, its parameters (the
// Idempotency-Key header), its answers with their headers
// (Idempotent-Replayed, Retry-After) and the problem codes of each.
//
// Swagger UI's scripts and styles are embedded in the binary
// (github.com/swaggest/swgui's v5emb package) and served by the handler
// itself, as is the document: the page loads nothing from elsewhere and
// renders with no network. A service that does not import this package
// does not link them.
//
// [New] returns an [http.Handler] for everything under its Path
// (default "/docs"); mounting it is one line:
//
//	ref, err := reference.New(doc, reference.Config{})
//	router.GET("/docs/*any", gin.WrapH(ref)) // gin
//	mux.Handle("GET /docs/", ref)            // net/http
//
// The page is at /docs/ (gin and net/http redirect /docs to it), the
// document it renders at /docs/openapi.json.
package reference
