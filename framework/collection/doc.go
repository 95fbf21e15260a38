// Package collection is the PUT pattern of retrysafe, on the shared core
// of package framework: a client names a resource with a UUID it picks,
// and PUT /{name}/{id} creates it, converges on it when retried, and
// replaces it (or refuses another body, for a create-only resource).
//
// A [Resource] declares a typed command and the application's own gorm
// model, which embeds [System] (tenant_id, id, version, status, the
// fingerprints, the times; primary key (tenant_id, id)) next to its typed
// business columns and has-many child rows ([Resource.Children]). A
// [Resource.ModelFunc] maps the validated, normalized command onto the
// model (the two may be one struct) and must depend on the command alone;
// [Resource.RenderFunc] renders the representation; an optional replace
// guard ([Resource.ReplaceGuardFunc]) and write hooks
// ([Resource.OnCreateFunc], [Resource.OnReplaceFunc]) complete it. No JSON
// body is stored: the row is the resource, and the fingerprint of the
// command that wrote it is stored beside it. [New] builds the collection
// on a framework.Engine and [Collection.Mount] serves PUT, PATCH, GET,
// HEAD and DELETE /{name}/{id} and a newest-first list with filters
// ([Resource.Filters]). Every write has a transactional twin
// ([Collection.PutTx], [Collection.PatchTx], [Collection.DeleteTx],
// [Collection.SetStatusTx]) that joins the caller's transaction, so a
// resource row and the caller's own writes commit together.
// [Collection.MountLegacyPOST] serves an old POST endpoint through the same
// engine while clients move to PUT. docs/resources.md is the guide.
//
// The package holds no SQL: every statement on resource rows is the
// store's ([store.Rows], one method and one parameter struct per
// statement, spelled by the database's driver and checked by the contract
// suite in framework/store/storetest).
//
// # One decision, made on one read
//
// What a PUT does with the row it read (insert, reply, take the row lock,
// replace, purge an expired tombstone, refuse with a code) is decided by
// one pure function, decidePut (put_decision.go), from the row, the
// request's fingerprint and the database clock read with the row; it is
// table-tested without a database. The handler only reads and carries the
// decision out.
//
// A PUT reads its row with one indexed read outside any transaction,
// together with the database clock. A replay, a convergence, a 410, a 412
// or a 422 is answered from that read: nothing is written and no
// transaction is opened. A miss creates at once, in one transaction that
// is one round trip on PostgreSQL and on a MariaDB pool that batches: a
// plain INSERT of the row ([store.Rows] Create), the child rows, the
// creation hook's writes (the outbox event) and COMMIT go out together.
// If a concurrent create of the same ID committed first, that INSERT fails
// on the primary key, the whole transaction rolls back (hook writes
// included), and the request takes the careful path, which is also the
// path of every other write: INSERT … ON CONFLICT (tenant_id, id) DO
// NOTHING. One affected row means this request created the resource, and
// its child rows and creation hook run in the same transaction, so an
// outbox event exists exactly when the row does; zero rows means a
// concurrent create won, and the row is read in the transaction and
// decided again. A replace reads the row again under its lock (SELECT …
// FOR UPDATE), decides again, updates it fenced on the version it read
// (WHERE version = old) and replaces its child rows. Concurrent replaces
// of one resource are applied one after another, each answered 200 with
// its own version.
//
// # Inserting first
//
// A PUT whose ID is new does not need the read before its create, and on
// a database one round trip away that read is a round trip; on SQLite it
// compiles and steps two statements on a connection whose page cache
// another connection's commit has emptied. So a PUT without If-Match
// skips the read and sends the create transaction at once, while two
// conditions hold:
//
//   - The database clock has an estimate. The row's times are the
//     database's, and the representation the hook and the reply carry
//     holds them, so they are fixed before the batch leaves: the store's
//     [store.Clock] estimates the clock from the last reads (see package
//     framework/store). Without a recent reading there is no estimate and
//     the PUT reads first, which gives one.
//   - Most PUTs lately created. A collection keeps a moving average, over
//     about its last sixteen PUTs, of whether each one's row existed (as
//     its refused INSERT or its read told), and inserts first while it is
//     under a half. After a run of creates, a stream of replaces turns it
//     to read-first within eleven refused inserts; after the replaces, six
//     creates turn it back. A retry answered from the replay cache reads
//     first and does not count.
//
// A refused insert-first commits nothing (its row, child rows and hook
// writes were one transaction, rolled back whole) and the PUT goes on
// from a read, as a read-first one. On PostgreSQL the refusal is a logged
// unique violation and a dead row version: [Resource.ReadFirst] turns
// inserting first off for a collection where that costs more than a round
// trip, and a negative store.Config.ClockMaxAge turns it off for every
// collection (the bench's -off insert-first). [Collection.PutTx] runs in
// the caller's transaction, where a failed statement would abort the
// caller's work, and always reads first.
//
// # What a retry of the same body gets
//
// The row stores two fingerprints: fingerprint, of the body that wrote the
// current version, and create_fingerprint, of the creating request.
//
//   - Version 1, within the replay window of created_at: 201 with
//     Idempotent-Replayed: true and Location, the create's own answer,
//     byte for byte.
//   - Replaced, within the replay window of updated_at: 200 with
//     Idempotent-Replayed: true.
//   - Past the window: 200 with the current representation and no replay
//     header.
//
// A retry of the current body writes nothing, so a replace that changes
// nothing writes nothing. If-None-Match: * compares with
// create_fingerprint, so a create retried after a later replace replays
// (201, the current representation) and never overwrites; any other body
// is 412. The legacy POST route is the same request with 422
// idempotency_key_reuse in place of that 412.
//
// A conditional write converges: a PUT or PATCH whose If-Match is stale
// but whose result is already the current state is answered 200 with the
// current representation and writes nothing, because it is the retry of a
// write whose answer was lost; a stale If-Match whose result differs stays
// 412.
//
// The representation is rendered once per request, from the model just
// written or the row read, and the creation hook receives those bytes
// ([Change].Representation), so the event and the reply carry the same
// representation. Once a body was replayed, its retries that repeat its
// bytes take the bound command and fingerprint from the request front's
// cache ([Resource.ReplayCache]) instead of binding it again, and are
// still decided on the row they read; a decision to write binds the body
// again. The bytes a replay sends are kept per row version too, keyed by
// tenant, ID, version, fingerprint, status and both times as rendered: a
// version's columns are ModelFunc's of its fingerprint's command, so the
// key fixes the bytes.
//
// # Versions, conditions and deletes
//
// The ETag ([System.ETag]) is strong and new on every write: the version,
// a prefix of the fingerprint, and the creation time, so two incarnations
// of one ID (after a tombstone expired) never share one. If-Match on PUT,
// PATCH and DELETE uses the strong comparison (412 when stale; a DELETE
// with If-Match is a locked read and a write fenced on the version read).
// GET with a matching If-None-Match (weak comparison, * too) is 304;
// HEAD answers what GET would without the body.
//
// DELETE sets deleted_at to the database clock and bumps the version. GET
// and DELETE then answer 404, and PUT 410 resource_deleted while
// framework.Retention's TombstoneRetention (30 days) lasts on the database
// clock; after it the next PUT deletes the tombstone and its child rows in
// its transaction and creates anew, with a new creation-hook row.
//
// A unique index other than the primary key (a customer's email) that
// refuses a write is 400 validation_failed with reason unique: the same
// request can never succeed. A NUL character, which PostgreSQL text
// cannot store, is refused by the binder before any write, on every
// database.
//
// # The database clock
//
// The replay window and the tombstone retention are judged, and
// created_at, updated_at and deleted_at stamped, on the database clock,
// never on a process clock: a process whose clock runs 25 hours ahead
// still replays a create made a second earlier, and one 745 hours ahead
// still answers 410 for an order deleted a second earlier instead of
// creating it again (TestPutJudgesOnTheDatabaseClock,
// TestOrdersAcrossSkewedProcesses). The clock costs no round trip: the
// read-first returns it with the row (a miss returns it too), a create
// that inserts first takes the store's estimate, and decidePut takes it as
// an input, so it stays pure. One PUT has one time, the clock of its first
// read: its create, its replace and its purge cutoff use it; a delete
// stamps deleted_at in its own statement. Tests that let a window pass
// move the rows' times into the past; production statements carry no
// test offset.
//
// Times are UTC in the database clock's precision (microseconds on
// PostgreSQL and MariaDB, milliseconds on SQLite) and are put back in UTC
// when read, so a representation read back is the one that was written
// and replays are byte-identical. A table whose time columns keep fewer
// digits than the clock (a DATETIME(3), which gorm's AutoMigrate makes on
// MariaDB) would store a rounded time and make every read's ETag differ
// from the write's: the store reports the columns' step
// ([store.Rows] TimeStep, read from the catalog on a table's first write)
// and the collection stamps its rows with times cut to it.
//
// # Reads and lists
//
// A GET reads the row and its child rows in one snapshot, so an ETag and
// its child rows always belong to one version; where no snapshot can be
// taken (inside a transaction, a list page) the store checks the versions
// again and answers 409 request_in_progress, retryable, rather than a
// torn page. Lists are newest first (created_at DESC, id DESC) and their
// cursor is the position of the page's last row, so a row inserted while
// a client pages is never skipped or repeated ([MaxPageSize]). Filters are
// equality on the columns the resource declares, each to be backed by an
// index led by tenant_id. GET, HEAD and lists may read a replica within
// the rules of docs/scaling.md, "Reads from replicas".
//
// # PATCH
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
// Routes describe themselves ([Collection.Describe],
// [Collection.DescribeLegacyPOST]) as framework.RouteDescription values,
// which package framework/openapi turns into an OpenAPI document.
package collection
