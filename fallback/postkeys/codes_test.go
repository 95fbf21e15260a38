package postkeys_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// codesCmd is the command of the declarations below.
type codesCmd struct {
	Amount int64 `json:"amount" validate:"min=1"`
}

// TestRejectionCodesMustBeRegistered: a declaration naming a code nobody
// registered, or one that cannot be a stored business rejection, fails when
// the operation is declared, never while serving.
func TestRejectionCodesMustBeRegistered(t *testing.T) {
	t.Parallel()
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
	if err := engine.RegisterCodes(
		framework.CodeInfo{Code: "insufficient_funds", Status: http.StatusUnprocessableEntity, Title: "Insufficient funds"},
		framework.CodeInfo{Code: "amount_over_limit", Status: http.StatusBadRequest, Title: "Amount over limit"},
		framework.CodeInfo{Code: "ledger_busy", Status: http.StatusConflict, Title: "Ledger busy", Retryable: true},
		framework.CodeInfo{Code: "ledger_down", Status: http.StatusBadGateway, Title: "Ledger down"},
	); err != nil {
		t.Fatal(err)
	}
	exec := func(context.Context, *gorm.DB, postkeys.Request[codesCmd]) (postkeys.Response, error) {
		return postkeys.Response{Status: http.StatusNoContent}, nil
	}
	declare := func(name string, codes ...framework.Code) error {
		_, err := postkeys.Register(keys, postkeys.Operation[codesCmd]{Name: name, RejectionCodes: codes, ExecuteFunc: exec})
		return err
	}
	if err := declare("unregistered", "card_declined"); !errors.Is(err, framework.ErrCodeUnregistered) {
		t.Fatalf("an unregistered code: %v, want ErrCodeUnregistered", err)
	}
	for _, c := range []framework.Code{"ledger_busy", "ledger_down", framework.CodeValidationFailed,
		framework.CodeUnauthenticated, framework.CodeTooManyRequests, framework.CodeRequestInProgress,
		framework.CodeOutcomePending, framework.CodeIdempotencyKeyReuse, framework.CodeUnavailable} {
		if err := declare("refused_"+string(c), c); err == nil {
			t.Fatalf("%q was accepted as a stored rejection", c)
		}
	}
	if err := declare("accepted", "insufficient_funds", "amount_over_limit", framework.CodeNotFound,
		framework.CodeResourceLocked); err != nil {
		t.Fatalf("registered 4xx business codes: %v", err)
	}
}
