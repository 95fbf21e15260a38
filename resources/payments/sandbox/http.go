package sandbox

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/resources/payments"
)

// ChargeView is one element of GET /sandbox/charges.
type ChargeView struct {
	ID            string    `json:"id"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	DownstreamKey string    `json:"downstream_key"`
	PaymentMethod string    `json:"payment_method"`
	Status        string    `json:"status"`
	FailureCode   string    `json:"failure_code,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Mount registers GET /sandbox/charges on g, which must already run
// [server.RequireAuth]. It lists the tenant's charges oldest first,
// declines included; ?status=succeeded keeps only money actually moved.
func (p *Provider) Mount(g gin.IRouter) {
	g.GET("/sandbox/charges", p.handleList)
}

func (p *Provider) handleList(c *gin.Context) {
	tenant, ok := server.Tenant(c, p.logger)
	if !ok {
		return
	}
	status := c.Query("status")
	if status != "" && status != payments.ChargeSucceeded && status != payments.ChargeFailed {
		framework.WriteProblem(c.Writer, c.Request, p.logger, &framework.Error{
			Code: wire.CodeValidationFailed, Detail: "status must be succeeded or failed",
			Fields: []wire.FieldError{{Field: "status", Reason: "oneof=succeeded failed"}}})
		return
	}
	charges, err := p.List(c.Request.Context(), tenant, status)
	if err != nil {
		framework.WriteProblem(c.Writer, c.Request, p.logger, err)
		return
	}
	views := make([]ChargeView, len(charges))
	for i, ch := range charges {
		views[i] = ChargeView{ID: ch.ID, Amount: ch.Amount, Currency: ch.Currency, DownstreamKey: ch.DownstreamKey,
			PaymentMethod: ch.PaymentMethod, Status: ch.Status, FailureCode: ch.FailureCode, CreatedAt: ch.CreatedAt}
	}
	body, err := json.Marshal(views)
	if err != nil {
		framework.WriteProblem(c.Writer, c.Request, p.logger, err)
		return
	}
	framework.WriteReply(c.Writer, framework.Reply{Status: http.StatusOK, Body: body})
}
