package openapi

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// direction says whether a schema describes what a client sends (a
// request, whose required fields come from validate tags) or what it
// receives (a response, where every field without omitempty is present).
type direction int

const (
	inbound direction = iota
	outbound
)

var (
	timeType        = reflect.TypeFor[time.Time]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// schemaFor returns the JSON schema of t. Structs are closed
// (additionalProperties: false), so a field the description does not
// declare fails validation.
func schemaFor(t reflect.Type, dir direction) *openapi3.Schema {
	return schemaWith(t, dir, nil, 0)
}

func types(ts ...string) *openapi3.Types {
	v := openapi3.Types(ts)
	return &v
}

func schemaWith(t reflect.Type, dir direction, rules []string, depth int) *openapi3.Schema {
	if depth > 32 {
		return &openapi3.Schema{}
	}
	if t.Kind() == reflect.Pointer {
		s := schemaWith(t.Elem(), dir, rules, depth+1)
		if s.Type != nil && !s.Type.Includes("null") {
			*s.Type = append(*s.Type, "null")
		}
		return s
	}
	// Rules before "dive" apply to the container, those after to its
	// elements.
	own, elem := rules, []string(nil)
	for i, r := range rules {
		if r == "dive" {
			own, elem = rules[:i], rules[i+1:]
			break
		}
	}
	var s *openapi3.Schema
	switch {
	case t == timeType:
		s = &openapi3.Schema{Type: types("string"), Format: "date-time"}
	case t == rawMessageType:
		s = &openapi3.Schema{}
	case t.Kind() == reflect.Struct:
		s = structSchema(t, dir, depth)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		s = &openapi3.Schema{Type: types("array"), Items: openapi3.NewSchemaRef("", schemaWith(t.Elem(), dir, elem, depth+1))}
	case t.Kind() == reflect.Map:
		s = &openapi3.Schema{Type: types("object"), AdditionalProperties: openapi3.AdditionalProperties{
			Schema: openapi3.NewSchemaRef("", schemaWith(t.Elem(), dir, elem, depth+1))}}
	case t.Kind() == reflect.String:
		s = &openapi3.Schema{Type: types("string")}
	case t.Kind() == reflect.Bool:
		s = &openapi3.Schema{Type: types("boolean")}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		s = &openapi3.Schema{Type: types("integer")}
		if t.Kind() == reflect.Int64 || t.Kind() == reflect.Uint64 {
			s.Format = "int64"
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s = &openapi3.Schema{Type: types("number")}
	default:
		// interfaces and custom JSON types that the generator cannot see
		// through accept any JSON value.
		s = &openapi3.Schema{}
	}
	if t.Kind() == reflect.String && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textType)) {
		s = &openapi3.Schema{}
	}
	applyRules(s, own)
	return s
}

// structSchema describes a struct as encoding/json writes it: exported
// fields by their json names, embedded structs flattened.
func structSchema(t reflect.Type, dir direction, depth int) *openapi3.Schema {
	s := &openapi3.Schema{Type: types("object"), Properties: openapi3.Schemas{}}
	no := false
	s.AdditionalProperties = openapi3.AdditionalProperties{Has: &no}
	addFields(s, t, dir, depth)
	return s
}

func addFields(s *openapi3.Schema, t reflect.Type, dir direction, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, dir, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		rules := splitRules(f.Tag.Get("validate"))
		fs := schemaWith(f.Type, dir, rules, depth+1)
		s.Properties[name] = openapi3.NewSchemaRef("", fs)
		omitempty := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if isRequired(f.Type, rules, dir, omitempty) {
			s.Required = append(s.Required, name)
		}
	}
}

func splitRules(tag string) []string {
	if tag == "" || tag == "-" {
		return nil
	}
	return strings.Split(tag, ",")
}

// isRequired: a response always carries a field without omitempty; a
// request must carry a field tagged required, or one whose zero value its
// own min rule rejects (an amount of at least 1).
func isRequired(t reflect.Type, rules []string, dir direction, omitempty bool) bool {
	if dir == outbound {
		return !omitempty
	}
	for _, r := range rules {
		if r == "dive" {
			break
		}
		if r == "omitempty" {
			return false
		}
		if r == "required" {
			return true
		}
		name, arg, _ := strings.Cut(r, "=")
		if n, err := strconv.ParseFloat(arg, 64); err == nil && t.Kind() != reflect.Pointer &&
			((name == "min" || name == "gte") && n > 0 || name == "gt" && n >= 0) {
			return true
		}
	}
	return false
}

// applyRules turns the validate rules go-playground/validator enforces into
// schema keywords. Rules without a JSON Schema spelling (custom ones) are
// named in the description: the server still enforces them.
func applyRules(s *openapi3.Schema, rules []string) {
	isType := func(name string) bool { return s.Type != nil && s.Type.Includes(name) }
	optional := false
	var custom []string
	for _, r := range rules {
		name, arg, _ := strings.Cut(r, "=")
		num, numErr := strconv.ParseFloat(arg, 64)
		count := uint64(num)
		switch {
		case name == "omitempty":
			optional = true
		case name == "required":
			if isType("string") && !optional {
				s.MinLength = max(s.MinLength, 1)
			}
		case (name == "min" || name == "gte") && numErr == nil:
			switch {
			case isType("string"):
				if !optional {
					s.MinLength = count
				}
			case isType("array"):
				s.MinItems = count
			case isType("integer"), isType("number"):
				s.Min = &num
			}
		case (name == "max" || name == "lte") && numErr == nil:
			switch {
			case isType("string"):
				s.MaxLength = &count
			case isType("array"):
				s.MaxItems = &count
			case isType("integer"), isType("number"):
				s.Max = &num
			}
		case name == "len" && numErr == nil:
			switch {
			case isType("string"):
				s.MinLength, s.MaxLength = count, &count
			case isType("array"):
				s.MinItems, s.MaxItems = count, &count
			}
		case name == "oneof":
			for v := range strings.FieldsSeq(arg) {
				if isType("integer") {
					if n, err := strconv.ParseInt(v, 10, 64); err == nil {
						s.Enum = append(s.Enum, n)
					}
					continue
				}
				s.Enum = append(s.Enum, v)
			}
		case name == "iso4217":
			// Letters only: a command's Default may upper-case it first.
			s.Pattern = "^[A-Za-z]{3}$"
			s.Description = "An ISO 4217 currency code."
		case name == "uuid", name == "uuid4", name == "uuid7":
			s.Format = "uuid"
		case name == "email":
			s.Format = "email"
		case name == "url", name == "uri":
			s.Format = "uri"
		case name == "", name == "dive":
		default:
			custom = append(custom, r)
		}
	}
	if len(custom) > 0 {
		s.Description = strings.TrimSpace(s.Description + " Also checked by the server: " + strings.Join(custom, ", ") + ".")
	}
}

// mergePatchSchema is the schema of an RFC 7396 merge patch of a document
// of schema s: every member optional and nullable (null removes it), and
// an object member a merge patch of its own schema; arrays and other
// values are replaced whole, so they keep s's schema.
func mergePatchSchema(s *openapi3.Schema) *openapi3.Schema {
	out := *s
	out.Required = nil
	if len(s.Properties) == 0 {
		return &out
	}
	out.Properties = make(openapi3.Schemas, len(s.Properties))
	for name, prop := range s.Properties {
		p := *prop.Value
		if p.Type != nil && p.Type.Is("object") {
			p = *mergePatchSchema(&p)
		}
		if p.Type != nil && !p.Type.Includes("null") {
			p.Type = types(append(p.Type.Slice(), "null")...)
		}
		if len(p.Enum) > 0 {
			p.Enum = append(slices.Clone(p.Enum), nil)
		}
		out.Properties[name] = openapi3.NewSchemaRef("", &p)
	}
	return &out
}

// jsonPatchSchema is the schema of an RFC 6902 JSON Patch document.
func jsonPatchSchema() *openapi3.Schema {
	str := openapi3.NewSchemaRef("", &openapi3.Schema{Type: types("string")})
	op := &openapi3.Schema{Type: types("object"), Required: []string{"op", "path"},
		Properties: openapi3.Schemas{
			"op":    openapi3.NewSchemaRef("", &openapi3.Schema{Type: types("string"), Enum: []any{"add", "remove", "replace", "move", "copy", "test"}}),
			"path":  str,
			"from":  str,
			"value": openapi3.NewSchemaRef("", &openapi3.Schema{}),
		}}
	return &openapi3.Schema{Type: types("array"), Items: openapi3.NewSchemaRef("", op),
		Description: "RFC 6902 operations, applied in order."}
}
