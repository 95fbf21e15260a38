package orders

import (
	"testing"

	"github.com/google/uuid"
)

func TestPricesNormalizeToOneSpelling(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"10": "10.00", "10.0": "10.00", "10.00": "10.00", "0.5": "0.50", "007.10": "7.10", "9999999999.99": "9999999999.99"} {
		c := Command{Items: []Item{{SKU: "s", Quantity: 1, UnitPrice: in}}}
		if errs := c.Check(); len(errs) != 0 {
			t.Fatalf("Check(%q) = %v", in, errs)
		}
		c.Normalize()
		if got := c.Items[0].UnitPrice; got != want {
			t.Fatalf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"", "-1", "1.001", "1.", ".5", "1e2", "1,00", "12345678901", " 1"} {
		c := Command{Items: []Item{{SKU: "s", Quantity: 1, UnitPrice: in}}}
		if errs := c.Check(); len(errs) != 1 || errs[0].Field != "items[0].unit_price" {
			t.Fatalf("Check(%q) = %v, want one items[0].unit_price error", in, errs)
		}
	}
}

func TestRenderTotals(t *testing.T) {
	t.Parallel()
	cmd := Command{Customer: "c", Currency: "EUR", Items: []Item{
		{SKU: "a", Quantity: 3, UnitPrice: "0.10"},
		{SKU: "b", Quantity: 10000, UnitPrice: "9999999999.99"},
	}}
	var m Order
	toModel(&cmd, &m)
	m.ID, m.Status, m.Version = uuid.New(), StatusDraft, 1
	o := Render(&m).(Representation)
	if o.Total != "99999999999900.30" {
		t.Fatalf("total = %s", o.Total)
	}
}
