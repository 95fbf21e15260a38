package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
)

// CodeInsufficientFunds is this service's own business rejection: a debit
// larger than the balance. It is registered on the engine, stored under
// the key and replayed byte for byte; a new attempt needs a new key.
const CodeInsufficientFunds wire.Code = "insufficient_funds"

// Command is the body of POST /v1/credits: a positive amount credits the
// account, a negative one debits it.
type Command struct {
	Account string            `json:"account" validate:"required"`
	Amount  framework.Integer `json:"amount" validate:"ne=0,min=-99999999,max=99999999"`
}

var accountName = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// Check implements framework.Checker.
func (c *Command) Check() []wire.FieldError {
	if !accountName.MatchString(c.Account) {
		return []wire.FieldError{{Field: "account", Reason: "must match [a-z0-9_]{1,64}"}}
	}
	return nil
}

// Entry is the representation of an executed credit or debit.
type Entry struct {
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Amount    int64     `json:"amount"`
	Balance   int64     `json:"balance"`
	CreatedAt time.Time `json:"created_at"`
}

type entryRow struct {
	TenantID  string    `gorm:"column:tenant_id;primaryKey"`
	ID        string    `gorm:"column:id;primaryKey"`
	Account   string    `gorm:"column:account"`
	Amount    int64     `gorm:"column:amount"`
	Balance   int64     `gorm:"column:balance"`
	CreatedAt time.Time `gorm:"column:created_at"`
}

func (entryRow) TableName() string { return "credit_entries" }

// Credits declares the operation and serves the routes.
type Credits struct {
	engine   *framework.Engine
	endpoint *postkeys.Endpoint[Command]
}

// NewCredits registers insufficient_funds on the engine, then declares
// POST /v1/credits as a local-mode operation: the balance update, the
// entry row and the idempotency record commit in one transaction.
func NewCredits(engine *framework.Engine, keys *postkeys.Adapter) (*Credits, error) {
	if err := engine.RegisterCodes(wire.CodeInfo{
		Code: CodeInsufficientFunds, Status: http.StatusUnprocessableEntity, Title: "Insufficient funds",
	}); err != nil {
		return nil, err
	}
	c := &Credits{engine: engine}
	ep, err := postkeys.Register(keys, postkeys.Operation[Command]{
		Name:           "credits",
		Mode:           postkeys.Local,
		RejectionCodes: []wire.Code{CodeInsufficientFunds},
		ExecuteFunc:    c.execute,
	})
	if err != nil {
		return nil, err
	}
	c.endpoint = ep
	return c, nil
}

// Mount registers POST /credits and GET /accounts/:name on g, which runs
// server.RequireAuth.
func (c *Credits) Mount(g gin.IRouter) {
	g.POST("/credits", c.endpoint.Handle)
	g.GET("/accounts/:name", c.account)
}

// execute moves the balance with one relative statement: a credit creates
// the account on first use (an upsert, which gorm spells for the database:
// ON CONFLICT, or MySQL's ON DUPLICATE KEY UPDATE), a debit applies only
// while it is covered. The new balance is then read under the row lock
// the statement took (MySQL has no UPDATE … RETURNING).
func (c *Credits) execute(ctx context.Context, tx *gorm.DB, req postkeys.Request[Command]) (postkeys.Response, error) {
	amount := int64(req.Command.Amount)
	if amount > 0 {
		if err := tx.Table("credit_accounts").Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "tenant_id"}, {Name: "name"}},
			DoUpdates: clause.Assignments(map[string]any{"balance": gorm.Expr("credit_accounts.balance + ?", amount),
				"updated_at": req.Now}),
		}).Create(map[string]any{"tenant_id": req.Tenant, "name": req.Command.Account, "balance": amount,
			"updated_at": req.Now}).Error; err != nil {
			return postkeys.Response{}, err
		}
	} else {
		res := tx.Exec(`UPDATE credit_accounts SET balance = balance + ?, updated_at = ?
WHERE tenant_id = ? AND name = ? AND balance + ? >= 0`, amount, req.Now, req.Tenant, req.Command.Account, amount)
		if res.Error != nil {
			return postkeys.Response{}, res.Error
		}
		if res.RowsAffected != 1 {
			return postkeys.Response{}, framework.Errorf(CodeInsufficientFunds,
				"account %s cannot cover a debit of %d", req.Command.Account, -amount)
		}
	}
	var balances []int64
	if err := tx.Raw("SELECT balance FROM credit_accounts WHERE tenant_id = ? AND name = ?", req.Tenant, req.Command.Account).
		Find(&balances).Error; err != nil || len(balances) != 1 {
		return postkeys.Response{}, errors.Join(err, errors.New("credits: the account's row is gone"))
	}
	row := entryRow{TenantID: req.Tenant, ID: "cr_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		Account: req.Command.Account, Amount: amount, Balance: balances[0], CreatedAt: req.Now}
	if err := tx.Create(&row).Error; err != nil {
		return postkeys.Response{}, err
	}
	return postkeys.JSON(http.StatusCreated, Entry{ID: row.ID, Account: row.Account, Amount: row.Amount,
		Balance: row.Balance, CreatedAt: row.CreatedAt.UTC()}, row.ID)
}

// account answers GET /v1/accounts/:name with the tenant's balance.
func (c *Credits) account(g *gin.Context) {
	tenant, ok := server.Tenant(g, c.engine.Logger())
	if !ok {
		return
	}
	var balances []int64
	err := c.engine.DB().Gorm.WithContext(g.Request.Context()).
		Raw("SELECT balance FROM credit_accounts WHERE tenant_id = ? AND name = ?", tenant, g.Param("name")).
		Scan(&balances).Error
	if err != nil {
		c.engine.WriteProblem(g.Writer, g.Request, c.engine.DB().Classify(err))
		return
	}
	if len(balances) == 0 {
		c.engine.WriteProblem(g.Writer, g.Request, framework.Errorf(wire.CodeNotFound, "no such account"))
		return
	}
	body, _ := json.Marshal(map[string]any{"name": g.Param("name"), "balance": balances[0]})
	framework.WriteReply(g.Writer, framework.Reply{Status: http.StatusOK, Body: body})
}
