// Command oapiclient creates an order with the Go client that oapi-codegen
// generates from the demo's OpenAPI 3.0 document: TestOAPICodegenClient
// (tests/openapi_codegen_test.go) writes the client beside this file, in
// a module of its own, and runs
//
//	go run . SERVER TOKEN ORDER_ID
//
// It sends PUT /v1/orders/{id}, sends it again as a retry would, reads the
// order back, and prints one JSON line per answer: what the generated
// client parsed from it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	openapi_types "github.com/oapi-codegen/runtime/types"
)

// answer is what the generated client parsed from one answer.
type answer struct {
	Call     string `json:"call"`
	Status   int    `json:"status"`
	ID       string `json:"id,omitempty"`
	Total    string `json:"total,omitempty"`
	Version  int64  `json:"version,omitempty"`
	Location string `json:"location,omitempty"`
	Replayed string `json:"replayed,omitempty"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "oapiclient:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: oapiclient SERVER TOKEN ORDER_ID")
	}
	server, token := args[0], args[1]
	var id openapi_types.UUID
	if err := id.UnmarshalText([]byte(args[2])); err != nil {
		return err
	}
	c, err := NewClientWithResponses(server, WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		return err
	}
	var body OrdersPutJSONRequestBody
	body.Customer, body.Currency = "cus_oapi", "EUR"
	if err := json.Unmarshal([]byte(`[{"sku":"sku_1","quantity":2,"unit_price":"9.50"}]`), &body.Items); err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	ctx := context.Background()
	for _, call := range []string{"put", "put again"} {
		res, err := c.OrdersPutWithResponse(ctx, id, &OrdersPutParams{}, body)
		if err != nil {
			return err
		}
		a := answer{Call: call, Status: res.StatusCode()}
		if o := res.JSON201; o != nil {
			a.ID, a.Total, a.Version = o.Id, o.Total, o.Version
		}
		if h := res.Headers201; h != nil {
			a.Location, a.Replayed = deref(h.Location), deref(h.IdempotentReplayed)
		}
		if err := out.Encode(a); err != nil {
			return err
		}
	}
	res, err := c.OrdersGetWithResponse(ctx, id, &OrdersGetParams{})
	if err != nil {
		return err
	}
	a := answer{Call: "get", Status: res.StatusCode()}
	if o := res.JSON200; o != nil {
		a.ID, a.Total, a.Version = o.Id, o.Total, o.Version
	}
	return out.Encode(a)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
