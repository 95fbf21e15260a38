package client

import (
	"encoding/json"
	"fmt"
)

// marshalBody returns body, or value marshalled with encoding/json when
// body is nil and value is not.
func marshalBody(body []byte, value any) ([]byte, error) {
	if body != nil || value == nil {
		return body, nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal Value: %w", ErrInvalidRequest, err)
	}
	return b, nil
}

// Decode unmarshals the JSON body of a successful answer into a T, for
// example the representation of an order:
//
//	res, err := c.Create(ctx, client.CreateRequest{Collection: "/v1/orders", Value: cmd})
//	if err != nil { … }
//	order, err := client.Decode[Order](res)
//
// A problem answer is an [*Error]; its decoded body is [Error.Problem]
// (or [ProblemOf]).
func Decode[T any](res *Result) (T, error) {
	var v T
	if res == nil {
		return v, fmt.Errorf("client: Decode of a nil Result")
	}
	if err := json.Unmarshal(res.Body, &v); err != nil {
		return v, fmt.Errorf("client: decode %d answer: %w", res.Status, err)
	}
	return v, nil
}
