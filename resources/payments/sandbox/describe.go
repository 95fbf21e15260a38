package sandbox

import (
	"reflect"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// Describe returns the description of the route [Provider.Mount] registers
// under prefix ("/v1"), for the API description.
func (p *Provider) Describe(prefix string) []framework.RouteDescription {
	list := framework.DescribeGet(prefix+"/sandbox/charges", "sandbox.charges", "List the sandbox provider's charges",
		reflect.TypeFor[[]ChargeView]())
	list.Tags = []string{"sandbox"}
	list.Problems = []wire.Code{wire.CodeUnauthenticated, wire.CodeUnavailable, wire.CodeInternal}
	return []framework.RouteDescription{list}
}
