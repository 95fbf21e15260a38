package openapi

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// spdxID is an SPDX license identifier (not an expression), whose text
// spdx.org publishes at a URL of its own.
var spdxID = regexp.MustCompile(`^[A-Za-z0-9.+-]+$`)

// downgrade rewrites doc, generated in OpenAPI 3.1's spelling, in 3.0's
// ([Version30]): a type list with "null" becomes the one type and
// nullable: true, and a license's SPDX identifier, which 3.0 has no field
// for, becomes the URL of its text on spdx.org. What 3.0 cannot say (two
// types, keywords of JSON Schema 2020-12 only) the generator writes
// nowhere; kin-openapi's validation of the result, which [New] runs,
// refuses it should that change.
func downgrade(doc *openapi3.T) error {
	doc.OpenAPI = Version30
	if l := doc.Info.License; l != nil && l.Identifier != "" {
		if !spdxID.MatchString(l.Identifier) {
			return fmt.Errorf("openapi: the license identifier %q is an SPDX expression, which OpenAPI 3.0 cannot say: give the license's URL instead", l.Identifier)
		}
		l.URL, l.Identifier = "https://spdx.org/licenses/"+l.Identifier+".html", ""
	}
	seen := map[*openapi3.Schema]bool{}
	for _, s := range doc.Components.Schemas {
		nullable(s, seen)
	}
	content := func(c openapi3.Content) {
		for _, m := range c {
			nullable(m.Schema, seen)
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range op.Parameters {
				nullable(p.Value.Schema, seen)
			}
			if op.RequestBody != nil {
				content(op.RequestBody.Value.Content)
			}
			for _, resp := range op.Responses.Map() {
				content(resp.Value.Content)
				for _, h := range resp.Value.Headers {
					nullable(h.Value.Schema, seen)
				}
			}
		}
	}
	return nil
}

// nullable spells "null" in the type lists of ref's schema and its
// subschemas as OpenAPI 3.0 does: nullable: true.
func nullable(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	if s.Type.Includes("null") {
		s.Type = types(slices.DeleteFunc(slices.Clone(s.Type.Slice()), func(t string) bool { return t == "null" })...)
		s.Nullable = true
	}
	for _, p := range s.Properties {
		nullable(p, seen)
	}
	for _, sub := range slices.Concat(s.AllOf, s.AnyOf, s.OneOf) {
		nullable(sub, seen)
	}
	nullable(s.Items, seen)
	nullable(s.AdditionalProperties.Schema, seen)
	nullable(s.Not, seen)
}
