package main

import (
	"strings"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
)

// Customer is the request body of PUT /v1/customers/{id} and the gorm
// model of the customers table at once: typed columns plus the engine's
// system columns.
type Customer struct {
	collection.System
	Name  string `json:"name" validate:"required,max=100" gorm:"not null"`
	Email string `json:"email" validate:"required,email,max=254" gorm:"not null;uniqueIndex:idx_customers_email,expression:tenant_id,priority:1;uniqueIndex:idx_customers_email,priority:2"`
	Plan  string `json:"plan" validate:"omitempty,oneof=free pro" gorm:"not null"`
}

// Default implements framework.Defaulter: a customer starts on the free plan.
func (c *Customer) Default() {
	if c.Plan == "" {
		c.Plan = "free"
	}
}

// Normalize implements framework.Normalizer: one spelling of an address,
// so that a retry with "Ada@Example.com" is the same request.
func (c *Customer) Normalize() { c.Email = strings.ToLower(c.Email) }

// customers declares the resource: created or replaced by PUT, listed
// newest first and filtered by email (?email=ada@example.com).
func customers(engine *framework.Engine) (*collection.Collection[Customer, Customer], error) {
	return collection.New(engine, collection.Resource[Customer, Customer]{
		Name:    "customers",
		Mode:    collection.CreateOrReplace,
		Filters: []string{"email"},
	})
}
