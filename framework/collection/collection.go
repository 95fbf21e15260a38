package collection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Mode says what a PUT with a different body does to an existing resource.
type Mode int

const (
	// CreateOrReplace resources are replaced by a PUT with a different body
	// (while the replace guard allows it); version goes up by one.
	CreateOrReplace Mode = iota
	// CreateOnly resources are immutable: a PUT with a different body to an
	// existing ID is 422 idempotency_key_reuse.
	CreateOnly
)

// Resource declares a PUT resource: Cmd is the typed request body (validate
// tags, optionally [Defaulter], [Checker], [Normalizer]) and Model the
// application's gorm model, a struct embedding [System] with typed business
// columns and, where the domain has them, has-many child rows. Cmd and Model
// may be one struct.
type Resource[Cmd, Model any] struct {
	// Name is the URL segment and the operation name in fingerprints
	// ("orders"). Required.
	Name string
	// Singular names one resource in problem details ("no such order").
	// Defaults to Name without a trailing "s".
	Singular string
	// Table is the resource table. Defaults to the model's gorm table name.
	Table string
	// BasePath is the path the collection is mounted under, used for
	// Location headers. Defaults to "/v1/" + Name.
	BasePath string
	// Mode is CreateOrReplace or CreateOnly. Defaults to CreateOrReplace.
	Mode Mode
	// InitialStatus is the status of a new resource. Defaults to "active".
	InitialStatus string
	// ModelFunc fills the business columns and child rows of m from the
	// validated, normalized command; m's [System] columns are the engine's.
	// It must depend on cmd alone. Required unless Cmd and Model are one
	// type, in which case the command is the model.
	ModelFunc func(cmd *Cmd, m *Model)
	// RenderFunc builds the representation of a resource from its row (with
	// its child rows), without modifying m. Defaults to the model's JSON
	// preceded by id, status, version, created_at and updated_at.
	RenderFunc func(m *Model) any
	// ReplaceGuardFunc, when set, is asked before a replace or a PATCH
	// with the current row (without child rows for a PUT); an error (for
	// example [ErrResourceLocked], or a code of the application's own
	// listed in Problems) refuses it. Runs under the row lock.
	ReplaceGuardFunc func(m *Model) error
	// Problems lists the problem codes of the application's own (a
	// shipment's 409 shipment_labelled) that ReplaceGuardFunc,
	// OnCreateFunc or OnReplaceFunc may answer a write with; the
	// API description ([Collection.Describe],
	// [Collection.DescribeLegacyPOST]) lists them for PUT, PATCH and the
	// legacy POST beside the codes the framework answers itself. Each must
	// be registered on the engine ([framework.Engine.RegisterCodes])
	// before New, which fails with [framework.ErrCodeUnregistered]
	// otherwise. Defaults to none.
	Problems []wire.Code
	// OnCreateFunc, when set, runs inside the insert's transaction, only
	// when the insert happened: outbox events and audit rows written on tx
	// commit or roll back with the resource. On PostgreSQL the insert may
	// still be on its way (it travels with the commit): when the ID is
	// taken (a concurrent create committed first, or a PUT that inserts
	// first finds the row), this transaction fails and the hook's writes
	// are rolled back with it, so the hook must write only on tx, never
	// outside the database, and leave c.Model as it is: the PUT goes on
	// with it. Writes whose answer it does not need go out fastest as the
	// store queues them for the COMMIT (outbox.Append, store.Rows.Create).
	OnCreateFunc func(ctx context.Context, tx *gorm.DB, c Change[Model]) error
	// OnReplaceFunc, when set, runs inside a replace's transaction after the
	// row and its child rows were written, only when the replace happened
	// (never for a replay, a convergence or a refusal). A PATCH that
	// changes the resource is a replace and runs it too.
	OnReplaceFunc func(ctx context.Context, tx *gorm.DB, c Change[Model]) error
	// OnStatusFunc, when set, runs inside [Collection.SetStatusTx]'s
	// transaction, only when the status actually changed.
	OnStatusFunc func(ctx context.Context, tx *gorm.DB, c Change[Model]) error
	// Children names the model's has-many associations stored with the
	// resource (an order's items), each with the ORDER BY of its rows. Their
	// gorm foreign keys must be tenant_id and a column referencing id. They
	// are inserted in the insert's transaction, deleted and inserted again
	// by a replace, and loaded by GET and lists. Defaults to none.
	Children []Preload
	// Filters names the columns a list may be filtered on by equality
	// (?status=draft); the query parameter is the column name. Each must be
	// backed by an index starting with tenant_id. Defaults to none.
	Filters []string
	// SemanticHeaders names request headers that change the meaning of a
	// command (an API version, say); their values join the fingerprint.
	SemanticHeaders []string
	// Volatile lists dotted JSON paths of command fields left out of the
	// fingerprint.
	Volatile []string
	// CommandFunc returns the command a PUT of m's current state would
	// carry (m has its child rows): the document a PATCH applies its patch
	// to. It must depend on m's business columns and child rows alone.
	// Defaults to the representation (RenderFunc's, or the default one)
	// decoded into Cmd, members it does not name left out: right whenever
	// the representation carries every command field under the same JSON
	// name, as orders and customers do. A command with a field the
	// representation hides (a secret, a write-only setting) needs its own
	// CommandFunc, or a PATCH would reset that field.
	CommandFunc func(m *Model) Cmd
	// ReplayCache is how many bytes of bodies the PUT and legacy POST
	// handlers keep the commands of for retries of the same bytes
	// ([framework.ReplayCache]): once a
	// body was replayed, a retry that repeats its bytes (with the same
	// tenant, ID and semantic headers, and at most
	// [framework.MaxReplayCacheBody] long) takes its bound command and
	// fingerprint from the cache instead of binding, validating and
	// fingerprinting it again, and is decided on the row it reads like any
	// other. A retry whose row asks for a write binds its body again. This
	// needs Cmd's Default, Check and Normalize, its validation and
	// ModelFunc to depend on the body alone, as they are documented to.
	// The representations of the row versions replayed are kept in a
	// second cache of the same budget. Defaults to
	// [framework.DefaultReplayCache]; negative keeps neither.
	ReplayCache int
	// ReadFirst makes every PUT read its row before it writes. By default
	// a PUT without If-Match inserts first, stamped with the estimated
	// database clock ([store.Clock]; [store.Config.ClockMaxAge] turns the
	// estimate off for a whole store), while most of the PUTs the
	// collection served lately created a row; one that finds the ID taken
	// (a retry this process has not replayed, a replace) rolls back and
	// reads. Set ReadFirst where a refused INSERT (a line in PostgreSQL's
	// log, a dead row version) costs more than a round trip.
	ReadFirst bool
}

// Preload names a has-many association of a model stored with the
// resource ([Resource.Children]).
type Preload struct {
	// Field is the model's association field ("Items").
	Field string
	// OrderBy orders the child rows ("position").
	OrderBy string
}

// Change is what the write hooks ([Resource.OnCreateFunc],
// [Resource.OnReplaceFunc], [Resource.OnStatusFunc]) receive: the row as
// written (with its child rows) and the representation the reply carries.
type Change[Model any] struct {
	Model          *Model
	Representation []byte
}

// Collection serves one [Resource] on an [Engine].
type Collection[Cmd, Model any] struct {
	engine   *framework.Engine
	res      Resource[Cmd, Model]
	rows     store.Rows
	children []child
	// preload and childTables are the children as the rows' statements
	// take them.
	preload     []store.RowPreload
	childTables []store.RowChildTable
	// updateColumns are the columns a replace writes: all but the key,
	// created_at, create_fingerprint and deleted_at.
	updateColumns []string
	// front reads, binds and fingerprints the PUTs of the HTTP handlers
	// (with the cache of replayed commands), and fingerprints every PUT.
	front *framework.Front[Cmd]
	// renders keeps the representations of the row versions replayed
	// ([Collection.renderVersion]), with a budget of the same size; nil when
	// Resource.ReplayCache is negative.
	renders *framework.ReplayCache[[]byte]
	// first is the insert-first policy of its PUTs ([insertFirst]).
	first insertFirst
}

// child is a has-many association of the model, resolved by gorm's schema.
type child struct {
	Preload
	rel   *schema.Relationship
	table store.RowChildTable
}

// New validates r against its model's gorm schema and returns
// its collection.
func New[Cmd, Model any](e *framework.Engine, r Resource[Cmd, Model]) (*Collection[Cmd, Model], error) {
	if e == nil {
		return nil, errors.New("collection: New needs an engine")
	}
	if r.Name == "" || strings.ContainsAny(r.Name, "/ ") {
		return nil, fmt.Errorf("collection: resource name %q is not a path segment", r.Name)
	}
	if _, ok := any(new(Model)).(Row); !ok {
		return nil, fmt.Errorf("collection: resource %q: the model %s does not embed System", r.Name, reflect.TypeFor[Model]())
	}
	if r.ModelFunc == nil && reflect.TypeFor[Cmd]() != reflect.TypeFor[Model]() {
		return nil, fmt.Errorf("collection: resource %q: the command is not the model, so it needs a ModelFunc", r.Name)
	}
	if r.Mode != CreateOrReplace && r.Mode != CreateOnly {
		return nil, fmt.Errorf("collection: resource %q has an unknown mode", r.Name)
	}
	for _, code := range r.Problems {
		if _, ok := e.Codes().Lookup(code); !ok {
			return nil, fmt.Errorf("collection: resource %q: %w: %q (register it with Engine.RegisterCodes before New)",
				r.Name, framework.ErrCodeUnregistered, code)
		}
	}
	r.Problems = slices.Clone(r.Problems)
	if r.Singular == "" {
		r.Singular = strings.TrimSuffix(r.Name, "s")
	}
	gdb := e.DB().Gorm
	s, err := schema.Parse(new(Model), &sync.Map{}, gdb.NamingStrategy)
	if err != nil {
		return nil, fmt.Errorf("collection: resource %q: %w", r.Name, err)
	}
	if r.Table == "" {
		r.Table = s.Table
	}
	if r.BasePath == "" {
		r.BasePath = "/v1/" + r.Name
	}
	if r.InitialStatus == "" {
		r.InitialStatus = "active"
	}
	c := &Collection[Cmd, Model]{engine: e, res: r, rows: e.DB().Rows(),
		front: framework.NewFront[Cmd](e.Binder(), framework.FrontConfig{Operation: r.Name, SemanticHeaders: r.SemanticHeaders,
			Volatile: r.Volatile, ReplayCache: r.ReplayCache}),
		renders: framework.NewReplayCache[[]byte](r.ReplayCache)}
	c.first.enabled = !r.ReadFirst
	for _, name := range s.DBNames {
		switch name {
		case "tenant_id", "id", "created_at", "create_fingerprint", "deleted_at":
		default:
			c.updateColumns = append(c.updateColumns, name)
		}
	}
	for _, f := range r.Filters {
		if !slices.Contains(s.DBNames, f) {
			return nil, fmt.Errorf("collection: resource %q: filter %q is not a column of %s", r.Name, f, r.Table)
		}
	}
	for _, p := range r.Children {
		ch, err := resolveChild(s, p)
		if err != nil {
			return nil, fmt.Errorf("collection: resource %q: %w", r.Name, err)
		}
		c.children = append(c.children, ch)
		c.preload = append(c.preload, store.RowPreload{Field: p.Field, OrderBy: p.OrderBy})
		c.childTables = append(c.childTables, ch.table)
	}
	return c, nil
}

func resolveChild(s *schema.Schema, p Preload) (child, error) {
	rel, ok := s.Relationships.Relations[p.Field]
	if !ok || rel.Type != schema.HasMany {
		return child{}, fmt.Errorf("child rows %q: not a has-many association of %s", p.Field, s.Name)
	}
	ch := child{Preload: p, rel: rel, table: store.RowChildTable{Table: rel.FieldSchema.Table}}
	tenant := false
	for _, ref := range rel.References {
		switch {
		case ref.PrimaryKey == nil:
		case ref.PrimaryKey.DBName == "tenant_id" && ref.ForeignKey.DBName == "tenant_id":
			tenant = true
		case ref.PrimaryKey.DBName == "id":
			ch.table.ParentColumn = ref.ForeignKey.DBName
		}
	}
	if !tenant || ch.table.ParentColumn == "" {
		return child{}, fmt.Errorf(`child rows %q: the association needs gorm:"foreignKey:TenantID,<ParentID>;references:TenantID,ID"`, p.Field)
	}
	if p.OrderBy == "" {
		return child{}, fmt.Errorf("child rows %q: OrderBy is required", p.Field)
	}
	return ch, nil
}

// PutRequest is one PUT of a command to a resource ID.
type PutRequest[Cmd any] struct {
	Tenant  string
	ID      uuid.UUID
	Command Cmd
	// Header carries the conditional headers (If-Match, If-None-Match) and
	// the resource's semantic headers.
	Header http.Header
	// keyReuse turns an If-None-Match mismatch into 422 (legacy POST).
	keyReuse bool
}

// Result is the outcome of a write: what [WriteReply] sends.
type Result struct {
	Status   int
	Body     []byte
	ETag     string
	Location string
	Replayed bool
	// Outcome is OutcomeExecuted (inserted or replaced), OutcomeReplayed
	// (same request within the replay window) or OutcomeConverged (same
	// request after it): nothing was written unless it is OutcomeExecuted.
	Outcome string
	// Fingerprint is the request's fingerprint in its stored form
	// ("v1:<64 hex digits>"); logs carry its [FingerprintPrefix].
	Fingerprint string
}

func (c *Collection[Cmd, Model]) location(id uuid.UUID) string {
	return c.res.BasePath + "/" + id.String()
}

func (c *Collection[Cmd, Model]) key(tenant string, id uuid.UUID) store.RowKey {
	return store.RowKey{Table: c.res.Table, Tenant: tenant, ID: id}
}

// read is [store.Rows.Read] of the collection's rows; rows that kept
// changing while read are 409 request_in_progress, which a client retries.
func (c *Collection[Cmd, Model]) read(ctx context.Context, db *gorm.DB, p store.RowReadParams) (bool, error) {
	found, err := c.rows.Read(ctx, db, p)
	return found, changedWhileRead(err)
}

// changedWhileRead answers [store.ErrChangedWhileRead] with 409
// request_in_progress: a read never pairs a version of a row with another
// version's child rows.
func changedWhileRead(err error) error {
	if errors.Is(err, store.ErrChangedWhileRead) {
		return &framework.Error{Code: wire.CodeRequestInProgress, Detail: "the resource changed while it was read; retry", Err: err}
	}
	return err
}

// put is one PUT, prepared: the command mapped onto a model, fingerprinted.
type put[Model any] struct {
	state putState
	key   store.RowKey
	model *Model
}

func (c *Collection[Cmd, Model]) prepare(req *PutRequest[Cmd]) (put[Model], error) {
	if req.ID == uuid.Nil {
		return put[Model]{}, framework.Errorf(wire.CodeInvalidResourceID, "the resource ID must be a non-nil UUID")
	}
	fp, err := c.front.Fingerprint(framework.Target{Tenant: req.Tenant, PathParams: map[string]string{"id": req.ID.String()},
		Header: req.Header}, req.Command)
	if err != nil {
		return put[Model]{}, err
	}
	return c.prepared(req, fp), nil
}

// prepared is the PUT of req, whose fingerprint is known.
func (c *Collection[Cmd, Model]) prepared(req *PutRequest[Cmd], fingerprint string) put[Model] {
	var m *Model
	if c.res.ModelFunc == nil {
		m = any(&req.Command).(*Model)
	} else {
		m = new(Model)
		c.res.ModelFunc(&req.Command, m)
	}
	return put[Model]{
		key:   c.key(req.Tenant, req.ID),
		model: m,
		state: putState{
			Fingerprint:     fingerprint,
			IfMatch:         req.Header.Get("If-Match"),
			IfNoneMatchStar: strings.TrimSpace(req.Header.Get("If-None-Match")) == "*",
			KeyReuse:        req.keyReuse,
			Mode:            c.res.Mode,
			Retention:       c.engine.Retention(),
		},
	}
}

// Put creates, converges on or replaces the resource. Where most of the
// collection's recent PUTs created a row ([Resource.ReadFirst]), a PUT
// without If-Match creates at once, in one write transaction (one round
// trip on PostgreSQL), stamped with the estimated database clock ([store.Clock]);
// when the ID is taken nothing of it commits, and the PUT goes on as a
// read-first one. Otherwise the row is read first without a transaction,
// with the database clock: a replay, a convergence or a refusal is
// answered from that one read. Only a miss or a replace opens a write
// transaction.
func (c *Collection[Cmd, Model]) Put(ctx context.Context, req PutRequest[Cmd]) (Result, error) {
	p, err := c.prepare(&req)
	if err != nil {
		return Result{}, err
	}
	res, _, err := c.put(ctx, &p, false)
	return res, err
}

// put carries out the prepared PUT p. With replyOnly, a PUT whose
// read-first decides on anything but a reply or a refusal stops there,
// writing nothing, and reports false.
func (c *Collection[Cmd, Model]) put(ctx context.Context, p *put[Model], replyOnly bool) (Result, bool, error) {
	eligible := !replyOnly && p.state.IfMatch == ""
	tried := false
	if eligible && c.first.open() {
		if now, ok := c.engine.DB().Clock().Now(); ok {
			// Insert first: a new ID is one round trip. The stamps are the
			// estimated database clock, never this process's.
			p.state.DBNow, tried = now, true
			res, err := c.create(ctx, p)
			if !errors.Is(err, store.ErrUniqueViolation) {
				if err == nil {
					c.first.saw(false)
				}
				return res, true, err
			}
			// The ID is taken (or a unique column is): nothing of the
			// create committed. Read, and decide as a read-first would.
			c.first.saw(true)
		}
	}
	cur := new(Model)
	found, err := c.readFirst(ctx, c.engine.DB().Gorm, p, cur)
	if err != nil {
		return Result{}, true, c.engine.DB().Classify(err)
	}
	if eligible && c.first.enabled && !tried {
		c.first.saw(found)
	}
	d := c.decide(p, found, cur, false, false)
	switch d.Action {
	case actReply, actReplyCurrent, actRefuse:
		res, err := c.reply(ctx, c.engine.DB().Gorm, p, d, cur)
		return res, true, c.engine.DB().Classify(err)
	}
	if replyOnly {
		return Result{}, false, nil
	}
	if d.Action == actInsert {
		res, err := c.create(ctx, p)
		if !errors.Is(err, store.ErrUniqueViolation) {
			return res, true, err
		}
		// A concurrent create of this ID committed first (or a unique
		// column is taken): decide again on the INSERT … ON CONFLICT path.
	}
	var res Result
	err = c.engine.DB().Write(ctx, func(tx *gorm.DB) error {
		var err error
		res, err = c.putTx(ctx, tx, p, d.Action == actLock)
		return err
	})
	if err != nil {
		// The child rows' insert is pipelined with the commit: its unique
		// violation arrives here.
		return Result{}, true, uniqueProblem(err)
	}
	return res, true, nil
}

// PutTx is [Collection.Put] inside the caller's transaction tx, so that the
// caller's own rows commit together with the resource.
func (c *Collection[Cmd, Model]) PutTx(ctx context.Context, tx *gorm.DB, req PutRequest[Cmd]) (Result, error) {
	p, err := c.prepare(&req)
	if err != nil {
		return Result{}, err
	}
	cur := new(Model)
	found, err := c.readFirst(ctx, tx, &p, cur)
	if err != nil {
		return Result{}, err
	}
	d := c.decide(&p, found, cur, false, false)
	switch d.Action {
	case actReply, actReplyCurrent, actRefuse:
		return c.reply(ctx, tx, &p, d, cur)
	}
	return c.putTx(ctx, tx, &p, d.Action == actLock)
}

// readFirst reads the row of p into cur and the database clock into p: the
// time the PUT is judged by (replay window, tombstone retention) and
// stamps its writes with, whichever process serves it (DESIGN §3).
func (c *Collection[Cmd, Model]) readFirst(ctx context.Context, db *gorm.DB, p *put[Model], cur *Model) (bool, error) {
	var now time.Time // not &p.state.DBNow: p would move to the heap
	found, err := c.read(ctx, db, store.RowReadParams{Key: p.key, Dest: cur, Now: &now})
	p.state.DBNow = now
	if err == nil && db == c.engine.DB().Gorm {
		c.engine.DB().Clock().Observe(now, time.Now())
	}
	return found, err
}

func (c *Collection[Cmd, Model]) decide(p *put[Model], found bool, cur *Model, locked, purged bool) putDecision {
	s := p.state
	s.Exists, s.Locked, s.Purged = found, locked, purged
	if found {
		sys := any(cur).(Row).SystemColumns()
		sys.normalize()
		s.Row = *sys
		if locked && c.res.ReplaceGuardFunc != nil {
			s.Guard = c.res.ReplaceGuardFunc(cur)
		}
	}
	return decidePut(s)
}

// putTx inserts first (unless If-Match asks for an existing row or locked
// says a replace is already decided), then reads and carries out
// [decidePut]'s decision. Replays and refusals only read; the row is
// locked only once a replace is decided, and decided again under the lock.
func (c *Collection[Cmd, Model]) putTx(ctx context.Context, tx *gorm.DB, p *put[Model], locked bool) (Result, error) {
	purged := false
	for range 4 {
		if p.state.IfMatch == "" && !locked {
			if res, inserted, err := c.insert(ctx, tx, p); err != nil || inserted {
				return res, err
			}
		}
		cur := new(Model)
		found, err := c.read(ctx, tx, store.RowReadParams{Key: p.key, Dest: cur, ForUpdate: locked})
		if err != nil {
			return Result{}, err
		}
		d := c.decide(p, found, cur, locked, purged)
		switch d.Action {
		case actInsert: // an expired tombstone was purged meanwhile
			locked = false
		case actPurge:
			if _, err := c.rows.PurgeTombstone(ctx, tx, store.RowPurgeParams{Key: p.key, Children: c.childTables,
				DeletedBefore: p.state.DBNow.Add(-c.engine.Retention().TombstoneRetention)}); err != nil {
				return Result{}, err
			}
			purged, locked = true, false
		case actLock:
			locked = true
		case actReplace:
			return c.replace(ctx, tx, p, cur)
		default:
			return c.reply(ctx, tx, p, d, cur)
		}
	}
	return Result{}, framework.Errorf(wire.CodeRequestInProgress, "the resource changed concurrently; retry")
}

// create creates the resource, as of p.state.DBNow, in one transaction
// that on PostgreSQL is one round trip: a plain INSERT of the row
// ([store.Rows.Create]), the child rows and the creation hook's writes all
// travel with the COMMIT. Put calls it before any read (inserting first)
// or once the read-first found the row absent. A row of the same ID
// (committed first, or found by an insert-first) makes it fail with
// ErrUniqueViolation, and nothing of it commits; Put then reads, or takes
// the INSERT … ON CONFLICT path.
func (c *Collection[Cmd, Model]) create(ctx context.Context, p *put[Model]) (Result, error) {
	now, err := c.stamp(ctx, c.engine.DB().Gorm, p.state.DBNow)
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = c.engine.DB().Write(ctx, func(tx *gorm.DB) error {
		if err := c.rows.Create(ctx, tx, store.RowInsertParams{Table: p.key.Table, Row: c.newRow(p, now)}); err != nil {
			return err
		}
		var err error
		res, err = c.created(ctx, tx, p)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// newRow sets the system columns of a new row on p's model, created at
// now ([Collection.stamp]), and returns it.
func (c *Collection[Cmd, Model]) newRow(p *put[Model], now time.Time) *Model {
	sys := any(p.model).(Row).SystemColumns()
	*sys = System{TenantID: p.key.Tenant, ID: p.key.ID, Version: 1, Status: c.res.InitialStatus,
		CreateFingerprint: p.state.Fingerprint, Fingerprint: p.state.Fingerprint, CreatedAt: now, UpdatedAt: now}
	return p.model
}

// insert tries the INSERT … ON CONFLICT DO NOTHING; when it happened it
// goes on as [Collection.created].
func (c *Collection[Cmd, Model]) insert(ctx context.Context, tx *gorm.DB, p *put[Model]) (Result, bool, error) {
	now, err := c.stamp(ctx, tx, p.state.DBNow)
	if err != nil {
		return Result{}, false, err
	}
	inserted, err := c.rows.Insert(ctx, tx, store.RowInsertParams{Table: p.key.Table, Row: c.newRow(p, now)})
	if err != nil || !inserted {
		return Result{}, false, uniqueProblem(err)
	}
	res, err := c.created(ctx, tx, p)
	return res, err == nil, err
}

// created writes the child rows of the row just inserted, renders the
// representation once and runs the creation hook with it.
func (c *Collection[Cmd, Model]) created(ctx context.Context, tx *gorm.DB, p *put[Model]) (Result, error) {
	sys := any(p.model).(Row).SystemColumns()
	if err := c.insertChildren(ctx, tx, p.model); err != nil {
		return Result{}, err
	}
	body, err := c.render(p.model)
	if err != nil {
		return Result{}, err
	}
	if c.res.OnCreateFunc != nil {
		if err := c.res.OnCreateFunc(ctx, tx, Change[Model]{Model: p.model, Representation: body}); err != nil {
			return Result{}, err
		}
	}
	return Result{Status: http.StatusCreated, Body: body, ETag: sys.ETag(), Location: c.location(sys.ID), Outcome: telemetry.OutcomeExecuted,
		Fingerprint: p.state.Fingerprint}, nil
}

// insertChildren sets the keys of m's child rows from m and inserts them.
func (c *Collection[Cmd, Model]) insertChildren(ctx context.Context, tx *gorm.DB, m *Model) error {
	if len(c.children) == 0 {
		return nil
	}
	rv := reflect.ValueOf(m).Elem()
	sys := any(m).(Row).SystemColumns()
	for _, ch := range c.children {
		rows := ch.rel.Field.ReflectValueOf(ctx, rv)
		if rows.Len() == 0 {
			continue
		}
		for i := range rows.Len() {
			elem := rows.Index(i)
			for _, ref := range ch.rel.References {
				if ref.PrimaryKey == nil {
					continue
				}
				v, _ := ref.PrimaryKey.ValueOf(ctx, rv)
				if err := ref.ForeignKey.Set(ctx, elem, v); err != nil {
					return err
				}
			}
		}
		if err := c.rows.InsertChildren(ctx, tx, store.RowChildrenParams{RowChildTable: ch.table, Tenant: sys.TenantID,
			ParentID: sys.ID, Rows: rows.Addr().Interface()}); err != nil {
			return uniqueProblem(err)
		}
	}
	return nil
}

// replace writes p's model over the locked row cur, fenced on its version,
// and replaces its child rows. The replace guard was asked by the
// decision.
func (c *Collection[Cmd, Model]) replace(ctx context.Context, tx *gorm.DB, p *put[Model], cur *Model) (Result, error) {
	now, err := c.stamp(ctx, tx, p.state.DBNow)
	if err != nil {
		return Result{}, err
	}
	old := any(cur).(Row).SystemColumns()
	sys := any(p.model).(Row).SystemColumns()
	*sys = *old
	sys.Version, sys.Fingerprint, sys.UpdatedAt = old.Version+1, p.state.Fingerprint, now
	ok, err := c.rows.Update(ctx, tx, store.RowUpdateParams{Key: p.key, Version: old.Version, Row: p.model, Columns: c.updateColumns})
	if err != nil {
		return Result{}, uniqueProblem(err)
	}
	if !ok {
		return Result{}, framework.Errorf(wire.CodeRequestInProgress, "the resource changed concurrently")
	}
	for _, ch := range c.children {
		if err := c.rows.DeleteChildren(ctx, tx, store.RowChildrenParams{RowChildTable: ch.table, Tenant: sys.TenantID, ParentID: sys.ID}); err != nil {
			return Result{}, err
		}
	}
	if err := c.insertChildren(ctx, tx, p.model); err != nil {
		return Result{}, err
	}
	body, err := c.render(p.model)
	if err != nil {
		return Result{}, err
	}
	if c.res.OnReplaceFunc != nil {
		if err := c.res.OnReplaceFunc(ctx, tx, Change[Model]{Model: p.model, Representation: body}); err != nil {
			return Result{}, err
		}
	}
	return Result{Status: http.StatusOK, Body: body, ETag: sys.ETag(), Outcome: telemetry.OutcomeExecuted, Fingerprint: p.state.Fingerprint}, nil
}

// reply answers a decision that writes nothing. A replay or convergence of
// the current body takes the child rows from the request's own model: its
// fingerprint is the stored one, so they are the stored rows. Only a
// replay of a create after a later replace reads them.
func (c *Collection[Cmd, Model]) reply(ctx context.Context, db *gorm.DB, p *put[Model], d putDecision, cur *Model) (Result, error) {
	switch d.Action {
	case actRefuse:
		return Result{}, d.Err
	case actReplyCurrent:
		if len(c.children) > 0 {
			cur = new(Model)
			found, err := c.read(ctx, db, store.RowReadParams{Key: p.key, Dest: cur, Preload: c.preload})
			if err != nil {
				return Result{}, err
			}
			// The row may have changed since the decision (deleted,
			// replaced, purged and created again): decide again on what was
			// read, and let the client retry when the answer would differ.
			if !found || c.decide(p, true, cur, false, false) != d {
				return Result{}, framework.Errorf(wire.CodeRequestInProgress, "the resource changed concurrently; retry")
			}
		}
	default:
		if len(c.children) > 0 {
			dst, src := reflect.ValueOf(cur).Elem(), reflect.ValueOf(p.model).Elem()
			for _, ch := range c.children {
				ch.rel.Field.ReflectValueOf(ctx, dst).Set(ch.rel.Field.ReflectValueOf(ctx, src))
			}
		}
	}
	sys := any(cur).(Row).SystemColumns()
	body, err := c.renderVersion(cur, sys)
	if err != nil {
		return Result{}, err
	}
	res := Result{Status: d.Status, Body: body, ETag: sys.ETag(), Replayed: d.Replayed, Outcome: d.Outcome, Fingerprint: p.state.Fingerprint}
	if d.Status == http.StatusCreated {
		res.Location = c.location(sys.ID)
	}
	return res, nil
}

// renderVersion is [Collection.render] of cur, a version of a row with
// its child rows, whose system columns are sys. The representations of
// the versions replayed are kept ([Collection.renders]), keyed by what
// tells one version of a row from every other: tenant, ID, version,
// fingerprint, status and both times as the representation writes them
// (a row deleted and created again starts at version 1 again, with
// another created_at). A version's business columns are ModelFunc's of
// the command of its fingerprint, and its child rows too, so the key
// determines the representation. The caller gets its own copy.
func (c *Collection[Cmd, Model]) renderVersion(cur *Model, sys *System) ([]byte, error) {
	buf := make([]byte, 0, 128)
	buf = strconv.AppendInt(buf, sys.Version, 10)
	buf = append(append(buf, ' '), sys.Fingerprint...)
	buf = sys.CreatedAt.AppendFormat(append(buf, ' '), time.RFC3339Nano)
	buf = sys.UpdatedAt.AppendFormat(append(buf, ' '), time.RFC3339Nano)
	k, cacheable := c.renders.Key(sys.TenantID, []string{sys.ID.String(), sys.Status, string(buf)}, nil, nil, nil)
	if cacheable {
		if e, ok := c.renders.Get(k); ok {
			return bytes.Clone(e.Command), nil
		}
	}
	body, err := c.render(cur)
	if err == nil && cacheable {
		c.renders.Add(k, body, &framework.ReplayEntry[[]byte]{Command: bytes.Clone(body)})
	}
	return body, err
}

// uniqueProblem turns a unique violation of a business column, or a text
// the database cannot store, into a validation_failed problem: the request
// cannot succeed as it is.
func uniqueProblem(err error) error {
	switch {
	case errors.Is(err, store.ErrUniqueViolation):
		return &framework.Error{Code: wire.CodeValidationFailed, Detail: "another resource already holds a value that must be unique",
			Fields: []wire.FieldError{{Field: "", Reason: "unique"}}, Err: err}
	case errors.Is(err, store.ErrUnstorableText):
		return &framework.Error{Code: wire.CodeValidationFailed, Detail: "a text value holds a character that cannot be stored",
			Fields: []wire.FieldError{{Field: "", Reason: "no NUL characters"}}, Err: err}
	}
	return err
}

// namesVersion reports whether an If-Match field value names a version of
// the resource: an entity tag, not just * (which any version matches).
func namesVersion(field string) bool {
	for tag := range etagTags(field, false) {
		if tag != "" && tag != "*" {
			return true
		}
	}
	return false
}

// etagMatches evaluates an If-Match field value (a list of strong entity
// tags or *) with the strong comparison of RFC 9110.
func etagMatches(field, current string) bool { return matchETag(field, current, false) }

// etagMatchesWeak evaluates an If-None-Match field value: weak tags (W/"…")
// compare by their opaque part.
func etagMatchesWeak(field, current string) bool { return matchETag(field, current, true) }

func matchETag(field, current string, weak bool) bool {
	for tag := range etagTags(field, weak) {
		if tag == "*" || tag == current {
			return true
		}
	}
	return false
}

// etagTags yields the tags of an If-Match or If-None-Match field, with
// weak set stripped of their W/ prefix.
func etagTags(field string, weak bool) iter.Seq[string] {
	return func(yield func(string) bool) {
		for tag := range strings.SplitSeq(field, ",") {
			tag = strings.TrimSpace(tag)
			if weak {
				tag = strings.TrimPrefix(tag, "W/")
			}
			if !yield(tag) {
				return
			}
		}
	}
}
