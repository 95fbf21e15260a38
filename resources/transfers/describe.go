package transfers

import (
	"net/http"
	"reflect"

	"github.com/retrysafe/retrysafe/framework"
)

// Describe returns the descriptions of the routes [Transfers.Mount]
// registers under prefix ("/v1"), for the API description.
func (t *Transfers) Describe(prefix string) []framework.RouteDescription {
	post := t.endpoint.Describe(prefix+"/transfers", http.StatusCreated, Transfer{})
	post.Tags, post.Summary = []string{"transfers"}, "Move an amount between two accounts"
	account := framework.DescribeGet(prefix+"/accounts/{name}", "accounts.get", "Read an account's balance",
		reflect.TypeFor[Account](), framework.ParamDescription{Name: "name", Required: true})
	account.Tags = []string{"transfers"}
	return []framework.RouteDescription{post, account}
}
