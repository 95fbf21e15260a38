package ledger

import (
	"reflect"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// Describe returns the description of the route [Ledger.Mount] registers
// under prefix ("/v1"), for the API description.
func (l *Ledger) Describe(prefix string) []framework.RouteDescription {
	minLimit, maxLimit := 1, MaxPageSize
	list := framework.DescribeGet(prefix+"/ledger", "ledger.list", "List the tenant's ledger entries, newest first",
		reflect.TypeFor[Page]())
	list.Tags = []string{"ledger"}
	list.Query = []framework.ParamDescription{
		{Name: "limit", Description: "Page size.", Type: "integer", Minimum: &minLimit, Maximum: &maxLimit},
		{Name: "cursor", Description: "The next_cursor of the previous page."},
	}
	list.Problems = []wire.Code{wire.CodeValidationFailed, wire.CodeUnauthenticated,
		wire.CodeUnavailable, wire.CodeInternal}
	return []framework.RouteDescription{list}
}
