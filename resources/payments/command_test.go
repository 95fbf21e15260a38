package payments

import (
	"errors"
	"testing"

	"github.com/retrysafe/retrysafe/framework"
)

func binder(t *testing.T) *framework.Binder {
	t.Helper()
	b, err := framework.NewBinder(framework.BinderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := registerValidations(b.Validator()); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBindNormalizesOneCommand(t *testing.T) {
	t.Parallel()
	b := binder(t)
	want := Command{Amount: 4200, Currency: "usd", Customer: "cus_8812", Description: "Order 1042", PaymentMethod: MethodCardVisa}
	front := framework.NewFront[Command](b, framework.FrontConfig{Operation: Operation})
	var fps []string
	for _, body := range []string{
		`{"amount":4200,"currency":"usd","customer":"cus_8812","description":"Order 1042","payment_method":"pm_card_visa"}`,
		`{"payment_method":"pm_card_visa","description":"Order 1042","customer":"cus_8812","currency":"usd","amount":4.2e3}`,
		`{"amount":4200.00,"currency":"USD","customer":"cus_8812","description":"Order 1042"}`,
		`{"amount":42E2,"currency":"Usd","customer":"cus_8812","description":"Order 1042"}`,
	} {
		cmd, err := framework.Bind[Command](b, []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if cmd != want {
			t.Fatalf("%s: bound %+v, want %+v", body, cmd, want)
		}
		fp, err := front.Fingerprint(framework.Target{Tenant: "acme"}, cmd)
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, fp)
	}
	for _, fp := range fps[1:] {
		if fp != fps[0] {
			t.Fatalf("fingerprints differ: %v", fps)
		}
	}
}

func TestBindRejects(t *testing.T) {
	t.Parallel()
	b := binder(t)
	for body, field := range map[string]string{
		`{"amount":0,"currency":"usd","customer":"c"}`:                                    "amount",
		`{"amount":100000000,"currency":"usd","customer":"c"}`:                            "amount",
		`{"amount":-5,"currency":"usd","customer":"c"}`:                                   "amount",
		`{"amount":42.5,"currency":"usd","customer":"c"}`:                                 "amount",
		`{"amount":1e30,"currency":"usd","customer":"c"}`:                                 "amount",
		`{"amount":"4200","currency":"usd","customer":"c"}`:                               "amount",
		`{"amount":4200,"currency":"usdx","customer":"c"}`:                                "currency",
		`{"amount":4200,"currency":"abc","customer":"c"}`:                                 "currency",
		`{"amount":4200,"currency":"usd"}`:                                                "customer",
		`{"amount":4200,"currency":"usd","customer":"c","payment_method":"pm_other"}`:     "payment_method",
		`{"amount":4200,"currency":"usd","customer":"c","metadata":{"order":"1042"}}`:     "metadata",
		`{"currency":"usd","customer":"c"}`:                                               "amount",
		`{"amount":null,"currency":"usd","customer":"c","payment_method":"pm_card_visa"}`: "amount",
	} {
		_, err := framework.Bind[Command](b, []byte(body))
		e, ok := framework.AsError(err)
		if !ok || !errors.Is(err, framework.ErrValidationFailed) {
			t.Fatalf("%s: err = %v, want validation_failed", body, err)
		}
		if len(e.Fields) == 0 || e.Fields[0].Field != field {
			t.Fatalf("%s: fields %+v, want %s", body, e.Fields, field)
		}
	}
}
