package orders

import (
	"net/http"
	"reflect"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/wire"
)

// Describe returns the descriptions of the routes [Orders.Mount] registers
// under prefix ("/v1"), for the API description; legacy describes the
// legacy POST route too when it is mounted with that config.
func (o *Orders) Describe(prefix string, legacy *collection.LegacyConfig) []framework.RouteDescription {
	routes := o.Collection.Describe()
	if legacy != nil {
		routes = append(routes, o.Collection.DescribeLegacyPOST(*legacy))
	}
	submit := framework.DescribeGet(prefix+"/orders/{id}/submit", "orders.submit", "Submit a draft order",
		reflect.TypeFor[Representation](), framework.ParamDescription{Name: "id", Required: true, Format: "uuid"})
	submit.Method, submit.Tags = http.MethodPost, []string{"orders"}
	submit.Description = "Moves the order from draft to submitted; it can no longer be replaced (409 resource_locked). Submitting again changes nothing."
	submit.Responses[0].Headers = []string{"ETag"}
	submit.Problems = append(submit.Problems, wire.CodeRequestInProgress)
	return append(routes, submit)
}
