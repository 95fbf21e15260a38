package transfers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
)

// Operation is the name of the transfer operation in fingerprints, records,
// metrics and logs.
const Operation = "transfers"

// Command is the body of POST /v1/transfers.
type Command struct {
	FromAccount string            `json:"from_account" validate:"required"`
	ToAccount   string            `json:"to_account" validate:"required"`
	Amount      framework.Integer `json:"amount" validate:"min=1,max=99999999"`
	// Currency is an ISO 4217 code, case-insensitive ("eur" is "EUR").
	Currency string `json:"currency" validate:"required,iso4217"`
}

var accountNameRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// Default implements [framework.Defaulter]: currency codes are upper case.
func (c *Command) Default() { c.Currency = strings.ToUpper(c.Currency) }

// Check implements [framework.Checker]: account names and distinct accounts.
func (c *Command) Check() []wire.FieldError {
	var errs []wire.FieldError
	for _, f := range []struct{ field, name string }{{"from_account", c.FromAccount}, {"to_account", c.ToAccount}} {
		if !accountNameRE.MatchString(f.name) {
			errs = append(errs, wire.FieldError{Field: f.field, Reason: "must match [a-z0-9_]{1,64}"})
		}
	}
	if c.FromAccount == c.ToAccount {
		errs = append(errs, wire.FieldError{Field: "to_account", Reason: "must differ from from_account"})
	}
	return errs
}

// Transfer is the representation of an executed transfer.
type Transfer struct {
	ID          string    `json:"id"`
	FromAccount string    `json:"from_account"`
	ToAccount   string    `json:"to_account"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	CreatedAt   time.Time `json:"created_at"`
}

// Account is the representation of a ledger account.
type Account struct {
	Name     string `json:"name"`
	Balance  int64  `json:"balance"`
	Currency string `json:"currency"`
}

type accountRow struct {
	TenantID  string    `gorm:"column:tenant_id;primaryKey"`
	Name      string    `gorm:"column:name;primaryKey"`
	Currency  string    `gorm:"column:currency"`
	Balance   int64     `gorm:"column:balance"`
	CreatedAt time.Time `gorm:"column:created_at"`
	UpdatedAt time.Time `gorm:"column:updated_at"`
}

func (accountRow) TableName() string { return "accounts" }

type transferRow struct {
	TenantID    string    `gorm:"column:tenant_id;primaryKey"`
	ID          string    `gorm:"column:id;primaryKey"`
	FromAccount string    `gorm:"column:from_account"`
	ToAccount   string    `gorm:"column:to_account"`
	Amount      int64     `gorm:"column:amount"`
	Currency    string    `gorm:"column:currency"`
	CreatedAt   time.Time `gorm:"column:created_at"`
}

func (transferRow) TableName() string { return "transfers" }

func (r *transferRow) render() Transfer {
	return Transfer{ID: r.ID, FromAccount: r.FromAccount, ToAccount: r.ToAccount, Amount: r.Amount,
		Currency: r.Currency, CreatedAt: r.CreatedAt.UTC()}
}

// Transfers serves POST /transfers and GET /accounts/{name}.
type Transfers struct {
	engine   *framework.Engine
	endpoint *postkeys.Endpoint[Command]
}

// New registers the transfer operation on keys, in local mode.
func New(e *framework.Engine, keys *postkeys.Adapter) (*Transfers, error) {
	if e == nil || keys == nil {
		return nil, errors.New("transfers: New needs an engine and a postkeys adapter")
	}
	if err := e.RegisterCodes(Codes()...); err != nil {
		return nil, err
	}
	t := &Transfers{engine: e}
	ep, err := postkeys.Register(keys, postkeys.Operation[Command]{
		Name:           Operation,
		Mode:           postkeys.Local,
		KeyPolicy:      postkeys.KeyRequired,
		RejectionCodes: []wire.Code{CodeCurrencyMismatch},
		ExecuteFunc:    t.execute,
		RenderFunc:     t.render,
	})
	if err != nil {
		return nil, err
	}
	t.endpoint = ep
	return t, nil
}

// Mount registers POST /transfers and GET /accounts/:name on g, which must
// already run [server.RequireAuth].
func (t *Transfers) Mount(g gin.IRouter) {
	g.POST("/transfers", t.endpoint.Handle)
	g.GET("/accounts/:name", t.handleAccount)
}

// execute runs inside the claim's transaction: both balance moves, the
// transfer row and (after it returns) the record's completion commit
// together.
func (t *Transfers) execute(ctx context.Context, tx *gorm.DB, req postkeys.Request[Command]) (postkeys.Response, error) {
	cmd := req.Command
	if err := move(tx, req.Tenant, cmd.Currency, cmd.FromAccount, cmd.ToAccount, int64(cmd.Amount), req.Now); err != nil {
		return postkeys.Response{}, err
	}
	row := transferRow{TenantID: req.Tenant, ID: "tr_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		FromAccount: cmd.FromAccount, ToAccount: cmd.ToAccount, Amount: int64(cmd.Amount),
		Currency: cmd.Currency, CreatedAt: req.Now}
	// Nothing reads the insert's answer: on PostgreSQL it goes with the
	// record's completion instead of costing a round trip.
	if err := t.engine.DB().Rows().Create(ctx, tx, store.RowInsertParams{Row: &row}); err != nil {
		return postkeys.Response{}, err
	}
	return postkeys.JSON(http.StatusCreated, row.render(), row.ID)
}

// move moves amount from one account's balance to the other's, creating
// an account with this currency on first use: one statement, an insert of
// both accounts whose conflict updates the stored account (gorm's
// OnConflict: ON CONFLICT … DO UPDATE, or ON DUPLICATE KEY UPDATE on the
// MySQL family) by its leg's amount, only where the currencies agree (the
// currency itself is never assigned, so every condition reads the stored
// one), and returns the accounts as stored. An account that kept another
// currency refuses the transfer (and its transaction rolls the other leg
// back). Its rows come in name order, the order it locks the accounts in,
// so that two opposite transfers running at once cannot deadlock. from
// and to differ (the command's validation).
func move(tx *gorm.DB, tenant, currency, from, to string, amount int64, now time.Time) error {
	legs := []accountRow{
		{TenantID: tenant, Name: from, Currency: currency, Balance: -amount, CreatedAt: now, UpdatedAt: now},
		{TenantID: tenant, Name: to, Currency: currency, Balance: amount, CreatedAt: now, UpdatedAt: now},
	}
	if to < from {
		legs[0], legs[1] = legs[1], legs[0]
	}
	same := "accounts.currency = ?"
	res := tx.Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "tenant_id"}, {Name: "name"}},
		DoUpdates: clause.Assignments(map[string]any{
			"balance": gorm.Expr("CASE WHEN "+same+" AND accounts.name = ? THEN accounts.balance + ? WHEN "+same+
				" THEN accounts.balance + ? ELSE accounts.balance END", currency, legs[0].Name, legs[0].Balance, currency, legs[1].Balance),
			"updated_at": gorm.Expr("CASE WHEN "+same+" THEN ? ELSE accounts.updated_at END", currency, now),
		}),
	}, clause.Returning{Columns: []clause.Column{{Name: "name"}, {Name: "currency"}}}).Create(&legs)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 2 {
		return fmt.Errorf("transfers: the balance moves returned %d accounts, want 2", res.RowsAffected)
	}
	for _, a := range legs {
		if a.Currency != currency {
			return &framework.Error{Code: CodeCurrencyMismatch,
				Detail: fmt.Sprintf("account %s holds %s; the transfer is in %s", a.Name, a.Currency, currency)}
		}
	}
	return nil
}

// render re-renders a stored transfer response from its reference.
func (t *Transfers) render(ctx context.Context, db *gorm.DB, rec store.RecordRow) ([]byte, error) {
	var row transferRow
	if err := db.WithContext(ctx).Where("tenant_id = ? AND id = ?", rec.ID.Tenant, rec.ResourceRef).Take(&row).Error; err != nil {
		return nil, err
	}
	return json.Marshal(row.render())
}

func (t *Transfers) handleAccount(c *gin.Context) {
	logger := t.engine.Logger()
	tenant, ok := server.Tenant(c, logger)
	if !ok {
		return
	}
	name := c.Param("name")
	var rows []accountRow
	if accountNameRE.MatchString(name) {
		err := t.engine.DB().Gorm.WithContext(c.Request.Context()).
			Where("tenant_id = ? AND name = ?", tenant, name).Limit(1).Find(&rows).Error
		if err != nil {
			t.engine.WriteProblem(c.Writer, c.Request, t.engine.DB().Classify(err))
			return
		}
	}
	if len(rows) == 0 {
		t.engine.WriteProblem(c.Writer, c.Request, framework.Errorf(wire.CodeNotFound, "no such account"))
		return
	}
	body, err := json.Marshal(Account{Name: rows[0].Name, Balance: rows[0].Balance, Currency: rows[0].Currency})
	if err != nil {
		t.engine.WriteProblem(c.Writer, c.Request, err)
		return
	}
	framework.WriteReply(c.Writer, framework.Reply{Status: http.StatusOK, Body: body})
}
