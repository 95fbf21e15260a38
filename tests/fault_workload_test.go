package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// workload is a mix of logical writes of one tenant (PUT orders, payments
// and transfers) and the effects they must have, exactly once each.
type workload struct {
	tenant, token string
	ops           []faultOp
	orders        []uuid.UUID
	payments      int              // logical payments
	declined      int              // of which pm_card_declined (402)
	transfers     int              // logical transfers
	balances      map[string]int64 // expected, per account
}

// newWorkload builds n operations, a third of each kind; keys are unique
// to prefix. Every seventh payment is declined.
func newWorkload(n int, prefix string, seed uint64) *workload {
	rng := rand.New(rand.NewPCG(seed, 42))
	w := &workload{tenant: "acme", token: tokenAcme, balances: map[string]int64{}}
	for i := range n {
		switch i % 3 {
		case 0:
			id := uuid.New()
			w.orders = append(w.orders, id)
			w.ops = append(w.ops, faultOp{Method: http.MethodPut, Path: orderPath(id), Token: w.token,
				Body: orderBody(1+rng.IntN(9), fmt.Sprintf("%d.%02d", rng.IntN(100), rng.IntN(100)))})
		case 1:
			method := "pm_card_visa"
			if w.payments%7 == 6 {
				method = "pm_card_declined"
				w.declined++
			}
			w.payments++
			w.ops = append(w.ops, faultOp{Method: http.MethodPost, Path: "/v1/payments", Token: w.token,
				Key: fmt.Sprintf("%s-pay-%d", prefix, i), Body: paymentBody(100+rng.IntN(100000), method)})
		case 2:
			from := rng.IntN(4)
			to := (from + 1 + rng.IntN(3)) % 4
			amount := int64(1 + rng.IntN(10000))
			fromName, toName := fmt.Sprintf("%s_acc_%d", prefix, from), fmt.Sprintf("%s_acc_%d", prefix, to)
			w.balances[fromName] -= amount
			w.balances[toName] += amount
			w.transfers++
			w.ops = append(w.ops, faultOp{Method: http.MethodPost, Path: "/v1/transfers", Token: w.token,
				Key: fmt.Sprintf("%s-tr-%d", prefix, i), Body: transferBody(fromName, toName, int(amount), "EUR")})
		}
	}
	return w
}

// wantFinals checks each final answer: 201 for orders, transfers and
// payments (402 card_declined for declined ones).
func (w *workload) wantFinals(t *testing.T, finals []response) {
	t.Helper()
	for i, r := range finals {
		want := http.StatusCreated
		if w.ops[i].Path == "/v1/payments" && bytesContains(w.ops[i].Body, "pm_card_declined") {
			want = http.StatusPaymentRequired
		}
		if r.Status != want {
			t.Fatalf("%s: final answer %d, want %d: %s", w.ops[i].name(), r.Status, want, r.Body)
		}
	}
}

// joinLines prints one item per line.
func joinLines[T fmt.Stringer](items []T) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func bytesContains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// keepEvents makes a demo process keep the outbox events it published (its
// relay deletes them by default) in outbox_published, so that
// [eventsWritten] finds every event ever written: exactly one
// order.created per order, published or not.
var keepEvents = []string{"-outbox-retention", "1h"}

// writtenEvent is an outbox event as [eventsWritten] reports it.
type writtenEvent struct {
	Table       string
	Position    int64
	ID          string
	AggregateID string
	Seq         int64
}

func (e writtenEvent) String() string {
	return fmt.Sprintf("%s position %d id %s aggregate %s seq %d", e.Table, e.Position, e.ID, e.AggregateID, e.Seq)
}

// eventsWritten returns the outbox events matching where, pending or
// parked (outbox_events) and published and kept (outbox_published). It
// reads both tables in one statement, so in one snapshot: the relays keep
// moving events from one table to the other while a test looks, and two
// statements would count an event moved between them twice.
func eventsWritten(t *testing.T, db *gorm.DB, where string, args ...any) []writtenEvent {
	t.Helper()
	var events []writtenEvent
	sql := `SELECT 'outbox_events' AS "table", position, id, aggregate_id, seq FROM outbox_events WHERE ` + where + `
UNION ALL
SELECT 'outbox_published', position, id, aggregate_id, seq FROM outbox_published WHERE ` + where + `
ORDER BY position`
	if err := db.Raw(sql, append(append([]any{}, args...), args...)...).Scan(&events).Error; err != nil {
		t.Fatalf("read outbox events: %v", err)
	}
	return events
}

// wantEffects checks the database: every operation had exactly one effect
// (no duplicate, none lost), and every 201 the clients saw (acked, any
// number per operation) is backed by a committed row.
func (w *workload) wantEffects(t *testing.T, db *gorm.DB, acked []response) {
	t.Helper()
	count := func(table, where string, args ...any) int64 {
		t.Helper()
		var n int64
		q := db.Table(table).Where("tenant_id = ?", w.tenant)
		if where != "" {
			q = q.Where(where, args...)
		}
		if err := q.Count(&n).Error; err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		return n
	}
	ids := make([]string, len(w.orders))
	for i, id := range w.orders {
		ids[i] = id.String()
	}
	// In chunks: a soak's orders outnumber a statement's parameters.
	for chunk := range slices.Chunk(ids, 5000) {
		if n := count("orders", "id IN ?", chunk); n != int64(len(chunk)) {
			t.Fatalf("orders: %d rows, want %d", n, len(chunk))
		}
		if evs := eventsWritten(t, db, "tenant_id = ? AND aggregate_type = 'order' AND aggregate_id IN ? AND type = ?", w.tenant, chunk, "order.created"); len(evs) != len(chunk) {
			t.Fatalf("order.created events: %d, want %d (one per order):\n%s", len(evs), len(chunk), joinLines(evs))
		}
	}
	if n := count("payments", ""); n != int64(w.payments) {
		t.Fatalf("payments: %d rows, want %d", n, w.payments)
	}
	succeeded := int64(w.payments - w.declined)
	if n := count("payments", "status = ?", "succeeded"); n != succeeded {
		t.Fatalf("succeeded payments: %d, want %d", n, succeeded)
	}
	if n := count("sandbox_charges", "status = ?", "succeeded"); n != succeeded {
		t.Fatalf("succeeded sandbox charges: %d, want %d (one per payment)", n, succeeded)
	}
	if n := count("sandbox_charges", ""); n != int64(w.payments) {
		t.Fatalf("sandbox charges (declines included): %d, want %d", n, w.payments)
	}
	var matched int64
	if err := db.Table("payments p").Joins("JOIN sandbox_charges c ON c.tenant_id = p.tenant_id AND c.id = p.provider_charge_id").
		Where("p.tenant_id = ? AND p.status = ?", w.tenant, "succeeded").Count(&matched).Error; err != nil {
		t.Fatal(err)
	}
	if matched != succeeded {
		t.Fatalf("succeeded payments whose charge exists: %d, want %d", matched, succeeded)
	}
	if n := count("transfers", ""); n != int64(w.transfers) {
		t.Fatalf("transfers: %d rows, want %d", n, w.transfers)
	}
	for name, want := range w.balances {
		var got int64
		if err := db.Table("accounts").Select("balance").Where("tenant_id = ? AND name = ?", w.tenant, name).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("balance of %s = %d, want %d", name, got, want)
		}
	}
	for _, r := range acked {
		if r.Status != http.StatusCreated {
			continue
		}
		var v struct {
			ID               string `json:"id"`
			ProviderChargeID string `json:"provider_charge_id"`
		}
		if err := json.Unmarshal(r.Body, &v); err != nil || v.ID == "" {
			t.Fatalf("201 without an id: %s", r.Body)
		}
		switch {
		case len(v.ID) > 4 && v.ID[:4] == "pay_":
			if count("payments", "id = ? AND provider_charge_id = ? AND status = ?", v.ID, v.ProviderChargeID, "succeeded") != 1 {
				t.Fatalf("acknowledged payment %s is not committed with charge %s", v.ID, v.ProviderChargeID)
			}
		case len(v.ID) > 3 && v.ID[:3] == "tr_":
			if count("transfers", "id = ?", v.ID) != 1 {
				t.Fatalf("acknowledged transfer %s is not committed", v.ID)
			}
		default:
			if count("orders", "id = ?", v.ID) != 1 {
				t.Fatalf("acknowledged order %s is not committed", v.ID)
			}
		}
	}
}
