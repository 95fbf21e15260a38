// Package collection is the PUT pattern of retrysafe, on the shared core
// of package framework: a [Resource] declares a typed command and the
// application's own gorm model, which embeds [System] (tenant_id, id,
// version, status, fingerprints, timestamps; primary key (tenant_id, id))
// next to its typed business columns and has-many child rows. A
// [Resource.ModelFunc] maps the command onto the model (the two may be one
// struct), [Resource.RenderFunc] renders the representation, and an
// optional replace guard and creation hook complete it. [New]
// builds it on a framework.Engine and [Collection.Mount] serves PUT, GET,
// HEAD and
// DELETE /{name}/{id} and a newest-first list with filters. A PUT reads
// the row first (unless it inserts first, below); a replay is answered
// from that read. A miss is created
// in one transaction (one round trip on PostgreSQL). While most of the
// collection's recent PUTs created a row, a PUT without If-Match skips
// the read and creates at once, stamped with
// the database clock as estimated from earlier reads ([store.Clock],
// [Resource.ReadFirst]): a new ID costs that one transaction. When the ID
// is taken (a concurrent create committed first, or the insert-first
// found the row), that transaction rolls back and the PUT reads, then
// falls back to INSERT … ON CONFLICT (tenant_id, id) DO NOTHING where it
// must create, so a retried or concurrent create converges on one row,
// one set of child
// rows and one creation hook. What a PUT does is decided by one pure function from the
// row it read and the database clock read with it (the replay window and
// the tombstone retention are judged on the database clock, which also
// stamps the rows' times, so processes whose clocks disagree agree). The
// package holds no SQL: every statement on resource rows is the store's
// (store.Rows, one method and one parameter struct per statement, spelled
// by the database's driver and checked by the contract suite in
// framework/store/storetest). Every write has a transactional twin ([Collection.PutTx],
// [Collection.PatchTx], [Collection.DeleteTx], [Collection.SetStatusTx]).
// [Collection.MountLegacyPOST] serves an old POST endpoint through the
// same engine while clients move to PUT. Once a body was replayed, its
// retries that repeat its bytes take the bound command and fingerprint
// from a cache ([Resource.ReplayCache]) instead of binding it again, and
// are decided on the row they read like any other.
//
// A conditional write converges: a PUT or PATCH whose If-Match is stale
// but whose result is already the current state (its fingerprint is the
// one stored with the current version) is answered 200 with the current
// representation and writes nothing, because it is the retry of a write
// whose answer was lost; a stale If-Match whose result differs stays 412.
//
// Every create-or-replace resource also gets PATCH /{name}/{id}
// ([Collection.Patch], [Collection.PatchTx]), derived from its PUT: a merge
// patch (RFC 7396; [ContentTypeMergePatch] or application/json) or a JSON
// Patch (RFC 6902; [ContentTypeJSONPatch], with an If-Match naming a
// version, else 428 precondition_required: If-Match: * names none, and
// its relative operations would apply twice on a retry; a path with an
// array index RFC 6901 forbids, -1, 01 or +0, is 400) is applied to the
// command a PUT of the current state would carry ([Resource.CommandFunc],
// which defaults to the representation decoded into the command), the
// result is bound and validated by framework.Bind exactly as a PUT body,
// and it is written by the replace path, under the row lock: the same
// guard, versions, ETags, fingerprints and [Resource.OnReplaceFunc]. A
// PATCH never creates: an unknown ID is 404, a deleted one 410, and
// If-None-Match: * is false on a live one (412).
//
// Routes describe themselves for machine-readable API descriptions with
// [RouteDescription] values ([Collection.Describe],
// [Collection.DescribeLegacyPOST], [DescribeGet] for a resource's own
// reads); package framework/openapi turns them into an OpenAPI 3.1
// document.
//
// Routes describe themselves ([Collection.Describe],
// [Collection.DescribeLegacyPOST]) for package framework/openapi.
package collection
