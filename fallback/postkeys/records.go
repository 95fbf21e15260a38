package postkeys

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// stateReleased is logged when a record is removed; it is never stored.
const stateReleased store.RecordState = "released"

// storedResponse is a response as the record keeps it.
type storedResponse struct {
	status    int
	header    http.Header
	body      []byte
	truncated bool
	ref       string
	errorCode string
}

// recordOutcome is s as [store.Records.Complete] stores it, with the
// replay window ttl: the header as a JSON object, and no body when it
// was over the cap.
func (s storedResponse) recordOutcome(ttl time.Duration) (store.RecordOutcome, error) {
	header, err := json.Marshal(s.header)
	if err != nil {
		return store.RecordOutcome{}, err
	}
	o := store.RecordOutcome{Status: s.status, Headers: string(header), Body: s.body, Truncated: s.truncated,
		Ref: s.ref, ErrorCode: s.errorCode, TTL: ttl}
	if s.truncated {
		o.Body = nil
	}
	return o, nil
}

// responseHeader is the stored header of rec (a JSON object, as
// recordOutcome writes it); nil when it has none.
func responseHeader(rec *store.RecordRow) http.Header {
	var h http.Header
	if rec.ResponseHeaders != "" {
		_ = json.Unmarshal([]byte(rec.ResponseHeaders), &h)
	}
	return h
}

// codeJSON is a code as idempotency_operations stores it.
type codeJSON struct {
	Code      wire.Code `json:"code"`
	Status    int       `json:"status"`
	Title     string    `json:"title"`
	Retryable bool      `json:"retryable"`
}

// operationRow is what [Adapter.PublishOperations] stores of operation:
// its codes as a JSON array.
func operationRow(operation string, codes []wire.CodeInfo) (*store.RecordOperation, error) {
	stored := make([]codeJSON, len(codes))
	for i, c := range codes {
		stored[i] = codeJSON(c)
	}
	text, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	return &store.RecordOperation{Operation: operation, Codes: string(text)}, nil
}

// operationCodes are the codes that row, as operationRow stored it,
// declares.
func operationCodes(row *store.RecordOperation) ([]wire.CodeInfo, error) {
	var stored []codeJSON
	if err := json.Unmarshal([]byte(row.Codes), &stored); err != nil {
		return nil, fmt.Errorf("postkeys: the codes published for operation %q: %w", row.Operation, err)
	}
	codes := make([]wire.CodeInfo, len(stored))
	for i, c := range stored {
		codes[i] = wire.CodeInfo(c)
	}
	return codes, nil
}
