package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/retrysafe/retrysafe/framework"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/wire"
)

// Principal is the authenticated caller. Every record and resource is scoped
// to its Tenant.
type Principal struct {
	Tenant string
}

// Authenticator identifies the caller of a request. It returns an error
// matching [ErrUnauthenticated] when the credentials are missing or unknown.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// StaticTokens authenticates "Authorization: Bearer <token>" against a fixed
// token → tenant table.
type StaticTokens struct {
	tenants map[[sha256.Size]byte]string
}

var _ Authenticator = (*StaticTokens)(nil)

// NewStaticTokens builds a StaticTokens from token → tenant pairs.
func NewStaticTokens(tokens map[string]string) (*StaticTokens, error) {
	s := &StaticTokens{tenants: make(map[[sha256.Size]byte]string, len(tokens))}
	for token, tenant := range tokens {
		if token == "" || tenant == "" {
			return nil, fmt.Errorf("server: empty token or tenant in token table")
		}
		s.tenants[sha256.Sum256([]byte(token))] = tenant
	}
	return s, nil
}

// ParseTokenList parses "tok1:tenant1,tok2:tenant2" into a token table.
func ParseTokenList(list string) (map[string]string, error) {
	tokens := map[string]string{}
	for pair := range strings.SplitSeq(list, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		token, tenant, ok := strings.Cut(pair, ":")
		if !ok || token == "" || tenant == "" {
			return nil, fmt.Errorf("server: token entry %q is not token:tenant", pair)
		}
		tokens[token] = tenant
	}
	return tokens, nil
}

// Authenticate implements [Authenticator]. Tokens are compared by their
// SHA-256, so lookup time does not depend on how much of a token matches.
func (s *StaticTokens) Authenticate(r *http.Request) (Principal, error) {
	scheme, token, ok := strings.Cut(r.Header.Get(wire.HeaderAuthorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, framework.Errorf(wire.CodeUnauthenticated, "a bearer token is required")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	for known, tenant := range s.tenants {
		if subtle.ConstantTimeCompare(known[:], sum[:]) == 1 {
			return Principal{Tenant: tenant}, nil
		}
	}
	return Principal{}, framework.Errorf(wire.CodeUnauthenticated, "the bearer token is not valid")
}

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFromContext returns the authenticated caller, if any.
func PrincipalFromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// RequireAuth is gin middleware that authenticates every request before any
// handler (and so before any replay) runs: a key is never a credential. A
// request it refuses is answered 401 unauthenticated with
// WWW-Authenticate: Bearer, without its body being read, and its connection
// is closed. Authorization sent twice with different values is 400
// validation_failed, as [Framing] answers it on every route, so that the
// tenant served is the one every reader of the request sees, also where
// the server does not run Framing. Handlers behind it read the tenant
// with [Tenant] or [PrincipalFromContext].
func RequireAuth(a Authenticator, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if repeated(c.Request.Header, wire.HeaderAuthorization) {
			refuseRepeated(c.Writer, c.Request, wire.HeaderAuthorization)
			c.Abort()
			return
		}
		p, err := a.Authenticate(c.Request)
		if err != nil {
			closeWithoutReading(c.Writer)
			framework.WriteProblem(c.Writer, c.Request, logger, err)
			c.Abort()
			return
		}
		c.Request = c.Request.WithContext(WithPrincipal(c.Request.Context(), p))
		c.Next()
	}
}

// Tenant returns the authenticated tenant of the request (set by
// [RequireAuth]), or answers 401 unauthenticated and reports false.
func Tenant(c *gin.Context, logger *slog.Logger) (string, bool) {
	p, ok := PrincipalFromContext(c.Request.Context())
	if !ok || p.Tenant == "" {
		framework.WriteProblem(c.Writer, c.Request, logger, framework.Errorf(wire.CodeUnauthenticated, "a bearer token is required"))
		return "", false
	}
	return p.Tenant, true
}
