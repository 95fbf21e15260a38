package collection

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestBehind(t *testing.T) {
	t.Parallel()
	const current = `"3-abcdef01-lq2x9k"`
	cases := []struct {
		field string
		want  bool
	}{
		{"", false},
		{"*", false},
		{current, false},
		{`W/` + current, false},
		{`"2-00000000-lq2x9k"`, false}, // older: the replica's is newer
		{`"2-00000000-lq2x9k", "3-abcdef01-lq2x9k"`, false}, // both known
		{`"4-12345678-lq2x9k"`, true},                       // newer than the replica's
		{`"2-00000000-lq2x9k", "4-12345678-lq2x9k"`, true},
		{`"1-abcdef01-zzzzzz"`, true}, // another life of the ID
		{`"garbage"`, true},
		{`abc`, true},
		{`"x-abcdef01-lq2x9k"`, true},
	}
	for _, tc := range cases {
		if got := behind(tc.field, current); got != tc.want {
			t.Errorf("behind(%q) = %v, want %v", tc.field, got, tc.want)
		}
	}
	if !behind(`"1-a-b"`, "not an etag") {
		t.Error("a current tag that cannot be parsed must send the read to the primary")
	}
}

func TestNoCache(t *testing.T) {
	t.Parallel()
	for header, want := range map[[2]string]bool{
		{"", ""}:                                 false,
		{"Cache-Control", "max-age=0"}:           false,
		{"Cache-Control", "no-cache"}:            true,
		{"Cache-Control", "max-age=0, No-Cache"}: true,
		{"Cache-Control", "no-store"}:            true,
		{"Pragma", "no-cache"}:                   true,
	} {
		g, _ := gin.CreateTestContext(httptest.NewRecorder())
		g.Request = httptest.NewRequest("GET", "/v1/orders/x", nil)
		if header[0] != "" {
			g.Request.Header.Set(header[0], header[1])
		}
		if got := noCache(g); got != want {
			t.Errorf("%s: %q: noCache = %v, want %v", header[0], header[1], got, want)
		}
	}
}
