package payments

import (
	"net/http"
	"reflect"

	"github.com/retrysafe/retrysafe/framework"
)

// Describe returns the descriptions of the routes [Payments.Mount]
// registers, for the API description.
func (p *Payments) Describe() []framework.RouteDescription {
	post := p.endpoint.Describe(p.cfg.BasePath, http.StatusCreated, Payment{})
	post.Tags, post.Summary = []string{"payments"}, "Charge a customer"
	get := framework.DescribeGet(p.cfg.BasePath+"/{id}", "payments.get", "Read a payment",
		reflect.TypeFor[Payment](), framework.ParamDescription{Name: "id", Required: true})
	get.Tags = []string{"payments"}
	return []framework.RouteDescription{post, get}
}
