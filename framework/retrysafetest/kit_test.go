package retrysafetest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storemysql"
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/wire"
)

// The service the kit checks in its own tests: one resource of each
// kind, built on the framework as a team builds its own.

// note is a create-or-replace resource (PUT and PATCH /v1/notes/{id}).
type note struct {
	collection.System
	Title string `json:"title" validate:"required,max=100" gorm:"not null"`
	Stars int    `json:"stars" validate:"min=0,max=5" gorm:"not null"`
	Kind  string `json:"kind" validate:"omitempty,oneof=memo idea" gorm:"not null"`
}

// stamp is a create-only resource (PUT /v1/stamps/{id}).
type stamp struct {
	collection.System
	SKU string `json:"sku" validate:"required,max=32" gorm:"column:sku;not null"`
	Qty int    `json:"qty" validate:"min=1" gorm:"not null"`
}

// tallyCommand is the body of POST /v1/tallies, an operation in local
// mode; a tally is then read at GET /v1/tallies/{id}.
type tallyCommand struct {
	Counter string            `json:"counter" validate:"required,max=32"`
	Step    framework.Integer `json:"step" validate:"min=1,max=1000"`
}

type tally struct {
	TenantID  string    `gorm:"column:tenant_id;primaryKey;size:64" json:"-"`
	ID        string    `gorm:"column:id;primaryKey;size:64" json:"id"`
	Counter   string    `gorm:"column:counter;not null" json:"counter"`
	Step      int64     `gorm:"column:step;not null" json:"step"`
	CreatedAt time.Time `gorm:"column:created_at;not null" json:"created_at"`
}

const (
	tokenA = "tok_a"
	tokenB = "tok_b"
)

// testService is the service on a new database of dsn, and its effects.
type testService struct {
	handler http.Handler
	db      *store.DB
}

func newTestService(t *testing.T, dsn string) *testService {
	t.Helper()
	ctx := context.Background()
	// Identical requests at once queue on one row: a minute's lock and
	// statement timeouts keep how long the last one waits out of the
	// verdict.
	db, err := store.Open(ctx, dsn, store.Config{LockTimeout: time.Minute, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.AutoMigrate(&note{}, &stamp{}, &tally{}); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	engine, err := framework.NewEngine(db, framework.EngineConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := collection.New(engine, collection.Resource[note, note]{Name: "notes", Mode: collection.CreateOrReplace})
	if err != nil {
		t.Fatal(err)
	}
	stamps, err := collection.New(engine, collection.Resource[stamp, stamp]{Name: "stamps", Mode: collection.CreateOnly})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := postkeys.New(engine, postkeys.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tallies, err := postkeys.Register(keys, postkeys.Operation[tallyCommand]{
		Name: "tallies",
		ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[tallyCommand]) (postkeys.Response, error) {
			row := tally{TenantID: req.Tenant, ID: "tly_" + uuid.NewString(), Counter: req.Command.Counter,
				Step: int64(req.Command.Step), CreatedAt: req.Now.UTC()}
			if err := tx.Create(&row).Error; err != nil {
				return postkeys.Response{}, err
			}
			resp, err := postkeys.JSON(http.StatusCreated, row, row.ID)
			resp.Header = http.Header{wire.HeaderLocation: {"/v1/tallies/" + row.ID}}
			return resp, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewStaticTokens(map[string]string{tokenA: "a", tokenB: "b"})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	router := gin.New()
	server.UseProblemHandlers(router, logger)
	v1 := router.Group("/v1", server.RequireAuth(auth, logger))
	notes.Mount(v1)
	stamps.Mount(v1)
	v1.POST("/tallies", tallies.Handle)
	v1.GET("/tallies/:id", func(g *gin.Context) {
		tenant, ok := server.Tenant(g, logger)
		if !ok {
			return
		}
		var rows []tally
		if err := db.Gorm.Where("tenant_id = ? AND id = ?", tenant, g.Param("id")).Find(&rows).Error; err != nil {
			engine.WriteProblem(g.Writer, g.Request, db.Classify(err))
			return
		}
		if len(rows) == 0 {
			engine.WriteProblem(g.Writer, g.Request, framework.Errorf(wire.CodeNotFound, "no such tally"))
			return
		}
		body, _ := json.Marshal(rows[0])
		framework.WriteReply(g.Writer, framework.Reply{Status: http.StatusOK, Body: body})
	})
	return &testService{handler: router, db: db}
}

// count counts in the service's database.
func (s *testService) count(query string) func(ctx context.Context, tenant string) (int64, error) {
	return func(ctx context.Context, tenant string) (int64, error) {
		var n int64
		err := s.db.Gorm.WithContext(ctx).Raw(query, tenant).Scan(&n).Error
		return n, err
	}
}

// config is a Config of the kit for the service's operation of kind.
func (s *testService) config(kind Kind) Config {
	cfg := Config{
		Handler: s.handler,
		Tenants: [2]Tenant{Bearer("a", tokenA), Bearer("b", tokenB)},
	}
	switch kind {
	case PutCreateOnly:
		cfg.Operation = Operation{Path: "/v1/stamps/{id}", Body: []byte(`{"sku":"abc-1","qty":2}`), OtherBody: []byte(`{"sku":"abc-1","qty":3}`)}
		cfg.CountFunc = s.count("SELECT count(*) FROM stamps WHERE tenant_id = ?")
	case PutCreateOrReplace, Patch:
		cfg.Operation = Operation{Path: "/v1/notes/{id}", Body: []byte(`{"title":"hello","stars":3,"kind":"memo"}`),
			OtherBody: []byte(`{"title":"hello again","stars":4,"kind":"idea"}`)}
		if kind == Patch {
			cfg.Operation.Create, cfg.Operation.Body, cfg.Operation.OtherBody = cfg.Operation.Body, []byte(`{"stars":5,"kind":"idea"}`), nil
		}
		// Every create, replace and patch moves a note's version by one.
		cfg.CountFunc = s.count("SELECT COALESCE(SUM(version), 0) FROM notes WHERE tenant_id = ?")
	case PostWithKey:
		cfg.Operation = Operation{Path: "/v1/tallies", Body: []byte(`{"counter":"sheep","step":1}`), OtherBody: []byte(`{"counter":"sheep","step":2}`)}
		cfg.CountFunc = s.count("SELECT count(*) FROM tallies WHERE tenant_id = ?")
	}
	cfg.Operation.Kind = kind
	return cfg
}

var kinds = []Kind{PutCreateOnly, PutCreateOrReplace, Patch, PostWithKey}

// TestRunPassesOnTheFramework: the kit passes on resources of every kind
// that keep their promises, on every database configured.
func TestRunPassesOnTheFramework(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		s := newTestService(t, dsn)
		for _, kind := range kinds {
			t.Run(kind.String(), func(t *testing.T) { Run(t, s.config(kind)) })
		}
	})
}

// TestConfigIsCheckedFirst: a Config that cannot work stops the test
// before any request, saying what is missing.
func TestConfigIsCheckedFirst(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"nothing":        {Config{}, "set Handler or URL"},
		"https":          {Config{URL: "https://example.com"}, "not a plain-HTTP base URL"},
		"no id":          {Config{Operation: Operation{Kind: PutCreateOnly, Path: "/v1/stamps"}}, "has no {id}"},
		"no other body":  {Config{Operation: Operation{Kind: PostWithKey, Path: "/v1/x", Body: []byte(`{"a":1}`)}}, "needs an OtherBody"},
		"no create":      {Config{Operation: Operation{Kind: Patch, Path: "/v1/x/{id}", Body: []byte(`{"a":1}`)}}, "needs the Create body"},
		"body no object": {Config{Operation: Operation{Kind: PostWithKey, Path: "/v1/x", Body: []byte(`[1]`)}}, "not a JSON object"},
		"same tenant":    {Config{Tenants: [2]Tenant{Bearer("a", "x"), Bearer("a", "y")}}, "same tenant twice"},
	} {
		err := c.cfg.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// TestRunOnAURL: the kit checks a service that is already running, under
// a path prefix of its URL, as it checks a handler; a Location is read
// from the server's root.
func TestRunOnAURL(t *testing.T) {
	t.Parallel()
	s := newTestService(t, testdb.New(t, "sqlite"))
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", s.handler))
	mux.Handle("/v1/", s.handler) // where the tallies' Location points: the server's root
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, kind := range []Kind{PostWithKey, Patch} {
		t.Run(kind.String(), func(t *testing.T) {
			cfg := s.config(kind)
			cfg.Handler, cfg.URL = nil, srv.URL+"/api/"
			Run(t, cfg)
		})
	}
}
