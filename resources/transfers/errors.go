package transfers

import (
	"net/http"

	"github.com/retrysafe/retrysafe/wire"
)

// CodeCurrencyMismatch is the problem code of a transfer whose currency
// differs from an existing account's: 409, stored under the key and
// replayed; a new attempt needs a new key.
const CodeCurrencyMismatch wire.Code = "currency_mismatch"

// Codes returns the business problem codes transfers answers with; [New]
// registers them on its engine.
func Codes() []wire.CodeInfo {
	return []wire.CodeInfo{
		{Code: CodeCurrencyMismatch, Status: http.StatusConflict, Title: "Currency mismatch"},
	}
}
