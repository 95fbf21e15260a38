package postkeys_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/openapi"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// codesCmd is the command of the declarations below.
type codesCmd struct {
	Amount int64 `json:"amount" validate:"min=1"`
}

// setupCodes returns an engine on a fresh SQLite database and its adapter.
func setupCodes(t *testing.T) (*framework.Engine, *postkeys.Adapter) {
	t.Helper()
	db, err := store.Open(context.Background(), testdb.New(t, "sqlite"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	engine, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := postkeys.New(engine, postkeys.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return engine, keys
}

// TestRejectionCodesMustBeRegistered: a declaration naming a code nobody
// registered, or one that cannot be a stored business rejection, fails when
// the operation is declared, never while serving.
func TestRejectionCodesMustBeRegistered(t *testing.T) {
	t.Parallel()
	engine, keys := setupCodes(t)
	if err := engine.RegisterCodes(
		wire.CodeInfo{Code: "insufficient_funds", Status: http.StatusUnprocessableEntity, Title: "Insufficient funds"},
		wire.CodeInfo{Code: "amount_over_limit", Status: http.StatusBadRequest, Title: "Amount over limit"},
		wire.CodeInfo{Code: "ledger_busy", Status: http.StatusConflict, Title: "Ledger busy", Retryable: true},
		wire.CodeInfo{Code: "ledger_down", Status: http.StatusBadGateway, Title: "Ledger down"},
	); err != nil {
		t.Fatal(err)
	}
	exec := func(context.Context, *gorm.DB, postkeys.Request[codesCmd]) (postkeys.Response, error) {
		return postkeys.Response{Status: http.StatusNoContent}, nil
	}
	declare := func(name string, codes ...wire.Code) error {
		_, err := postkeys.Register(keys, postkeys.Operation[codesCmd]{Name: name, RejectionCodes: codes, ExecuteFunc: exec})
		return err
	}
	if err := declare("unregistered", "card_declined"); !errors.Is(err, framework.ErrCodeUnregistered) {
		t.Fatalf("an unregistered code: %v, want ErrCodeUnregistered", err)
	}
	for _, c := range []wire.Code{"ledger_busy", "ledger_down", wire.CodeValidationFailed,
		wire.CodeUnauthenticated, wire.CodeTooManyRequests, wire.CodeRequestInProgress,
		wire.CodeOutcomePending, wire.CodeIdempotencyKeyReuse, wire.CodeUnavailable} {
		if err := declare("refused_"+string(c), c); err == nil {
			t.Fatalf("%q was accepted as a stored rejection", c)
		}
	}
	if err := declare("accepted", "insufficient_funds", "amount_over_limit", wire.CodeNotFound,
		wire.CodeResourceLocked); err != nil {
		t.Fatalf("registered 4xx business codes: %v", err)
	}
}

// TestProblemsAreDescribed: the codes an operation declares it may answer
// beyond its rejections must be registered, and the API description lists
// them, with the path parameters of the route it is mounted on.
func TestProblemsAreDescribed(t *testing.T) {
	t.Parallel()
	engine, keys := setupCodes(t)
	if err := engine.RegisterCodes(
		wire.CodeInfo{Code: "insufficient_funds", Status: http.StatusPaymentRequired, Title: "Insufficient funds"},
		wire.CodeInfo{Code: "ledger_busy", Status: http.StatusServiceUnavailable, Title: "Ledger busy", Retryable: true},
	); err != nil {
		t.Fatal(err)
	}
	exec := func(context.Context, *gorm.DB, postkeys.Request[codesCmd]) (postkeys.Response, error) {
		return postkeys.Response{Status: http.StatusNoContent}, nil
	}
	if _, err := postkeys.Register(keys, postkeys.Operation[codesCmd]{Name: "unregistered",
		Problems: []wire.Code{"ledger_gone"}, ExecuteFunc: exec}); !errors.Is(err, framework.ErrCodeUnregistered) {
		t.Fatalf("an unregistered problem code: %v, want ErrCodeUnregistered", err)
	}
	ep, err := postkeys.Register(keys, postkeys.Operation[codesCmd]{Name: "accounts.debit",
		RejectionCodes: []wire.Code{"insufficient_funds"},
		Problems:       []wire.Code{wire.CodeNotFound, "ledger_busy"}, ExecuteFunc: exec})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi.New(openapi.Config{Title: "t", Version: "1", Codes: engine.Codes()},
		ep.Describe("/v1/accounts/{name}/debits", http.StatusCreated, nil))
	if err != nil {
		t.Fatal(err)
	}
	op := doc.T().Paths.Value("/v1/accounts/{name}/debits").Post
	if op.Parameters.GetByInAndName("path", "name") == nil {
		t.Fatal("the path parameter is not described")
	}
	for status, code := range map[int]string{402: "insufficient_funds", 404: "not_found", 503: "ledger_busy", 400: "invalid_resource_id"} {
		resp := op.Responses.Status(status)
		if resp == nil || !strings.Contains(*resp.Value.Description, code) {
			t.Fatalf("%d does not list %s: %+v", status, code, resp)
		}
	}
	if op.Responses.Status(http.StatusServiceUnavailable).Value.Headers["Retry-After"] == nil {
		t.Fatal("503 ledger_busy, a retryable code, does not declare Retry-After")
	}
}
