package postkeys_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
	"github.com/retrysafe/retrysafe/migrations"
)

// openKeys opens a SQLite file in dir with the framework's tables and an
// adapter on it.
func openKeys(ctx context.Context, dir string) (*store.DB, *postkeys.Adapter) {
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "example.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	engine, _ := framework.NewEngine(db, framework.EngineConfig{})
	keys, err := postkeys.New(engine, postkeys.Config{})
	if err != nil {
		panic(err)
	}
	return db, keys
}

// postWithKey mounts handle at POST path behind a bearer token and returns
// a function that POSTs a body there with an Idempotency-Key and prints
// the status.
func postWithKey(path string, handle gin.HandlerFunc) func(key, body string) {
	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	auth, _ := server.NewStaticTokens(map[string]string{"sk_demo": "demo"})
	router.POST(path, server.RequireAuth(auth, nil), handle)
	return func(key, body string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk_demo")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		fmt.Println(rec.Code, "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
}

// SignupCmd is the command of the local example.
type SignupCmd struct {
	Email string `json:"email" validate:"required,email"`
}

// A Local operation: ExecuteFunc's writes and the idempotency record
// commit in one transaction, so the retried signup inserts one row.
func ExampleRegister_local() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "postkeys-example")
	defer os.RemoveAll(dir)
	db, keys := openKeys(ctx, dir)
	defer db.Close()
	defer keys.Stop()
	db.Gorm.Exec("CREATE TABLE signups (tenant_id TEXT NOT NULL, email TEXT NOT NULL)")

	signup, err := postkeys.Register(keys, postkeys.Operation[SignupCmd]{
		Name: "signups",
		Mode: postkeys.Local,
		ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[SignupCmd]) (postkeys.Response, error) {
			if err := tx.Exec("INSERT INTO signups (tenant_id, email) VALUES (?, ?)", req.Tenant, req.Command.Email).Error; err != nil {
				return postkeys.Response{}, err
			}
			return postkeys.JSON(http.StatusCreated, map[string]string{"email": req.Command.Email}, "")
		},
	})
	if err != nil {
		panic(err)
	}
	post := postWithKey("/v1/signups", signup.Handle)
	post("signup-1", `{"email":"ada@example.com"}`)
	post("signup-1", `{"email":"ada@example.com"}`)
	var rows int64
	db.Gorm.Raw("SELECT count(*) FROM signups").Scan(&rows)
	fmt.Println("signups:", rows)
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// signups: 1
}

// ChargeCmd is the command of the phased example.
type ChargeCmd struct {
	Amount int64 `json:"amount" validate:"min=1"`
}

// A Phased operation calls a system outside the database (here a provider
// that counts its charges) between phases, each of which commits its
// writes with a recovery point. The provider gets the attempt's downstream
// key, so that a resumed attempt is one charge for it too; a retry of a
// completed request replays it without calling RunFunc.
func ExampleRegister_phased() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "postkeys-example")
	defer os.RemoveAll(dir)
	db, keys := openKeys(ctx, dir)
	defer db.Close()
	defer keys.Stop()
	db.Gorm.Exec("CREATE TABLE charges (key TEXT PRIMARY KEY, amount INTEGER NOT NULL, provider_id TEXT)")

	providerCharges := map[string]int64{} // the provider's side, by downstream key
	charge, err := postkeys.Register(keys, postkeys.Operation[ChargeCmd]{
		Name: "charges",
		Mode: postkeys.Phased,
		RunFunc: func(ctx context.Context, run *postkeys.Run[ChargeCmd]) (postkeys.Response, error) {
			cmd, _ := run.Command()
			if run.RecoveryPoint() == "" {
				err := run.Phase(ctx, "pending", func(tx *gorm.DB) (string, error) {
					return run.Key(), tx.Exec("INSERT INTO charges (key, amount) VALUES (?, ?)", run.Key(), cmd.Amount).Error
				})
				if err != nil {
					return postkeys.Response{}, err
				}
			}
			if err := run.Renew(ctx); err != nil { // before every outside call
				return postkeys.Response{}, err
			}
			downstream := run.DownstreamKey("charge")
			providerCharges[downstream] = cmd.Amount
			return run.Complete(ctx, "charged", func(tx *gorm.DB) (postkeys.Response, error) {
				if err := tx.Exec("UPDATE charges SET provider_id = ? WHERE key = ?", downstream, run.Key()).Error; err != nil {
					return postkeys.Response{}, err
				}
				return postkeys.JSON(http.StatusCreated, map[string]int64{"amount": cmd.Amount}, run.Key())
			})
		},
		ReconcileFunc: func(ctx context.Context, run *postkeys.Run[ChargeCmd]) (postkeys.Response, error) {
			return postkeys.Response{}, errors.New("ask the provider by run.DownstreamKey(\"charge\")")
		},
	})
	if err != nil {
		panic(err)
	}
	post := postWithKey("/v1/charges", charge.Handle)
	post("charge-1", `{"amount":4200}`)
	post("charge-1", `{"amount":4200}`)
	fmt.Println("provider charges:", len(providerCharges))
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// provider charges: 1
}
