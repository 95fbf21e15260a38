package postkeys_test

import (
	"context"
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

// DepositCmd is the typed command of the example operation.
type DepositCmd struct {
	Account string `json:"account" validate:"required,max=64"`
	Amount  int64  `json:"amount" validate:"min=1"`
}

// A local operation: the deposit's relative update and the idempotency
// record commit in one transaction, so a retried POST deposits once.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "postkeys-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "example.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	db.Gorm.Exec("CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)")

	engine, _ := framework.NewEngine(db, framework.EngineConfig{})
	keys, _ := postkeys.New(engine, postkeys.Config{})
	deposit, err := postkeys.Register(keys, postkeys.Operation[DepositCmd]{
		Name: "deposits",
		Mode: postkeys.Local,
		ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[DepositCmd]) (postkeys.Response, error) {
			err := tx.Exec(`INSERT INTO balances (account, amount) VALUES (?, ?)
ON CONFLICT (account) DO UPDATE SET amount = balances.amount + excluded.amount`,
				req.Command.Account, req.Command.Amount).Error
			if err != nil {
				return postkeys.Response{}, err
			}
			return postkeys.JSON(http.StatusCreated, map[string]any{"account": req.Command.Account, "deposited": req.Command.Amount}, "")
		},
	})
	if err != nil {
		panic(err)
	}
	auth, _ := server.NewStaticTokens(map[string]string{"sk_demo": "demo"})
	router := gin.New()
	v1 := router.Group("/v1", server.RequireAuth(auth, nil))
	v1.POST("/deposits", deposit.Handle)
	srv := httptest.NewServer(router)
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/deposits", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk_demo")
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Println(res.StatusCode, "replayed:", res.Header.Get("Idempotent-Replayed") == "true")
	}
	post("dep-1", `{"account":"acc_1","amount":100}`)
	post("dep-1", `{"amount":100,"account":"acc_1"}`) // a retry: same command
	post("dep-1", `{"account":"acc_1","amount":999}`) // same key, other command

	var balance int64
	db.Gorm.Raw("SELECT amount FROM balances WHERE account = 'acc_1'").Scan(&balance)
	fmt.Println("balance:", balance)
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// 422 replayed: false
	// balance: 100
}
