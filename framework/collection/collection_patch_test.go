package collection

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// TestJSONPatchArrayIndexes: RFC 6901 spells an array index as 0 or a
// number without a sign or leading zeros, and "-" past the end for add. A
// path whose token addresses an array in another spelling (-1, 01, +0,
// -0, 00) is validation_failed, however deep, as a path or a from, and
// nothing is applied. The same tokens name object members like any other
// text, in the document and in the values the patch brings.
func TestJSONPatchArrayIndexes(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"items":[{"sku":"a","packs":[1,2]},{"sku":"b","packs":[3]}],"labels":{"01":"x","-1":"y","+0":{"00":[5]}}}`)
	for _, patch := range []string{
		`[{"op":"remove","path":"/items/-1"}]`,
		`[{"op":"replace","path":"/items/01/sku","value":"z"}]`,
		`[{"op":"add","path":"/items/+0","value":{"sku":"c"}}]`,
		`[{"op":"add","path":"/items/00","value":{"sku":"c"}}]`,
		`[{"op":"remove","path":"/items/-0"}]`,
		`[{"op":"test","path":"/items/01/sku","value":"b"}]`,
		`[{"op":"replace","path":"/items/0/packs/01","value":9}]`,
		`[{"op":"move","from":"/items/01","path":"/items/0"}]`,
		`[{"op":"copy","from":"/items/-1","path":"/items/-"}]`,
		`[{"op":"add","path":"/labels/+0/00/-1","value":6}]`,
		`[{"op":"add","path":"/items/-","value":{"sku":"c"}},{"op":"remove","path":"/items/02"}]`,
	} {
		out, err := applyPatch(jsonPatch, doc, []byte(patch), 1<<20)
		if e, ok := framework.AsError(err); !ok || e.Code != wire.CodeValidationFailed {
			t.Fatalf("%s: %s, %v; want validation_failed", patch, out, err)
		}
	}
	for patch, want := range map[string]string{
		`[{"op":"replace","path":"/labels/01","value":"z"}]`:       `{"items":[{"sku":"a","packs":[1,2]},{"sku":"b","packs":[3]}],"labels":{"01":"z","-1":"y","+0":{"00":[5]}}}`,
		`[{"op":"remove","path":"/labels/-1"}]`:                    `{"items":[{"sku":"a","packs":[1,2]},{"sku":"b","packs":[3]}],"labels":{"01":"x","+0":{"00":[5]}}}`,
		`[{"op":"add","path":"/labels/+0/00/1","value":6}]`:        `{"items":[{"sku":"a","packs":[1,2]},{"sku":"b","packs":[3]}],"labels":{"01":"x","-1":"y","+0":{"00":[5,6]}}}`,
		`[{"op":"move","from":"/labels/01","path":"/labels/007"}]`: `{"items":[{"sku":"a","packs":[1,2]},{"sku":"b","packs":[3]}],"labels":{"007":"x","-1":"y","+0":{"00":[5]}}}`,
		`[{"op":"remove","path":"/items/1"},{"op":"add","path":"/items/-","value":{"sku":"c","packs":[]}},{"op":"replace","path":"/items/0/packs/1","value":7}]`:                                                                                        `{"items":[{"sku":"a","packs":[1,7]},{"sku":"c","packs":[]}],"labels":{"01":"x","-1":"y","+0":{"00":[5]}}}`,
		`[{"op":"add","path":"/labels/n","value":{"01":[1],"-1":{"+0":2}}},{"op":"add","path":"/labels/n/01/0","value":0},{"op":"test","path":"/labels/n","value":{"01":[0,1],"-1":{"+0":2}}},{"op":"copy","from":"/labels/n/-1","path":"/labels/-2"}]`: `{"items":[{"sku":"a","packs":[1,2]},{"sku":"b","packs":[3]}],"labels":{"01":"x","-1":"y","+0":{"00":[5]},"n":{"01":[0,1],"-1":{"+0":2}},"-2":{"+0":2}}}`,
	} {
		out, err := applyPatch(jsonPatch, doc, []byte(patch), 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", patch, err)
		}
		var got, wantDoc any
		if json.Unmarshal(out, &got) != nil || json.Unmarshal([]byte(want), &wantDoc) != nil || !reflect.DeepEqual(got, wantDoc) {
			t.Fatalf("%s:\n got %s\nwant %s", patch, out, want)
		}
	}
}
