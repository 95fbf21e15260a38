package wire

// Header names of the contract. Header names are case-insensitive on the
// wire; these are the canonical spellings.
const (
	// HeaderIdempotencyKey carries the idempotency key of a POST; the server
	// echoes it on every answer that had one.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderXIdempotencyKey is the accepted alias of Idempotency-Key.
	HeaderXIdempotencyKey = "X-Idempotency-Key"
	// HeaderIdempotentReplayed is "true" on an answer that repeats an
	// earlier execution.
	HeaderIdempotentReplayed = "Idempotent-Replayed"
	// HeaderRetryAfter is sent on exactly the answers a client may retry
	// with the same ID or key (see [CodeInfo.Retryable]).
	HeaderRetryAfter = "Retry-After"
	// HeaderETag, HeaderIfMatch and HeaderIfNoneMatch are the conditional
	// request headers of the PUT pattern.
	HeaderETag        = "ETag"
	HeaderIfMatch     = "If-Match"
	HeaderIfNoneMatch = "If-None-Match"
	// HeaderLocation names the created resource.
	HeaderLocation = "Location"
	// HeaderDeprecation (RFC 9745), HeaderLink (RFC 8288, rel
	// "successor-version") and HeaderSunset (RFC 8594) mark a legacy POST
	// route and point at its PUT form.
	HeaderDeprecation = "Deprecation"
	HeaderLink        = "Link"
	HeaderSunset      = "Sunset"
	// HeaderLinkTemplate (RFC 9652) gives the successor's URI template when
	// a legacy POST had no valid key to name the resource by.
	HeaderLinkTemplate = "Link-Template"
	// HeaderAuthorization carries "Bearer <token>"; HeaderWWWAuthenticate
	// ("Bearer") is sent with every 401.
	HeaderAuthorization   = "Authorization"
	HeaderWWWAuthenticate = "WWW-Authenticate"
	// HeaderContentType is the media type of a body.
	HeaderContentType = "Content-Type"
)

// Media types of the contract.
const (
	// ContentTypeJSON is the media type of request bodies and
	// representations.
	ContentTypeJSON = "application/json"
	// ContentTypeProblem is the media type of RFC 9457 problem details.
	ContentTypeProblem = "application/problem+json"
	// ContentTypeMergePatch is an RFC 7396 JSON merge patch, the PATCH
	// body that converges on retry (application/json is read as one too).
	ContentTypeMergePatch = "application/merge-patch+json"
	// ContentTypeJSONPatch is an RFC 6902 JSON Patch: its relative
	// operations do not converge on retry, so a PATCH in it needs an
	// If-Match naming a version (else 428 precondition_required; * names
	// none).
	ContentTypeJSONPatch = "application/json-patch+json"
)
