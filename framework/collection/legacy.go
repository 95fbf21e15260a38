package collection

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/telemetry"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/wire"
)

// LegacyConfig configures [Collection.MountLegacyPOST].
type LegacyConfig struct {
	// DeprecatedSince is when the POST route was deprecated, sent as the
	// RFC 9745 Deprecation header ("@<unix seconds>"). Required.
	DeprecatedSince time.Time
	// Sunset, when set, is sent as the RFC 8594 Sunset header: when the
	// route will be turned off. Defaults to none.
	Sunset time.Time
}

// LegacyID is the resource ID a legacy POST with key creates for resource
// name: a name-based (SHA-1, version 5) UUID in a namespace per resource. It
// is the same for every tenant; tenants stay apart by the primary key.
func LegacyID(resource, key string) uuid.UUID {
	return uuid.NewSHA1(legacyNamespace(resource), []byte(key))
}

// legacyNamespace is the namespace of [LegacyID] for resource.
func legacyNamespace(resource string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:retrysafe:resource:"+resource))
}

// MountLegacyPOST registers POST /{name} with a required Idempotency-Key as
// a create through the same engine as PUT: the ID is [LegacyID], the request
// is a PUT with If-None-Match: *, so a retry replays (201 +
// Idempotent-Replayed, same Location) and the same key with a different body
// is 422 idempotency_key_reuse. Every answer carries Deprecation and a Link
// to the PUT form (rel="successor-version"), and every call is counted per
// tenant in [telemetry.Metrics.LegacyRequests] and logged.
func (c *Collection[Cmd, Model]) MountLegacyPOST(g gin.IRouter, cfg LegacyConfig) error {
	if cfg.DeprecatedSince.IsZero() {
		return errors.New("collection: LegacyConfig.DeprecatedSince is required")
	}
	deprecation := "@" + strconv.FormatInt(cfg.DeprecatedSince.Unix(), 10)
	sunset := ""
	if !cfg.Sunset.IsZero() {
		sunset = cfg.Sunset.UTC().Format(http.TimeFormat)
	}
	namespace := legacyNamespace(c.res.Name)
	linkTemplate := "<" + c.res.BasePath + `/{id}>; rel="successor-version"`
	g.POST("/"+c.res.Name, func(g *gin.Context) {
		start := time.Now()
		h := g.Writer.Header()
		h.Set("Deprecation", deprecation)
		if sunset != "" {
			h.Set("Sunset", sunset)
		}
		// Until the key names the order, point at the PUT form with a fresh
		// ID (a valid successor URL) and give the template (RFC 9652).
		h.Set(wire.HeaderLink, "<"+c.location(uuid.New())+`>; rel="successor-version"`)
		h.Set(wire.HeaderLinkTemplate, linkTemplate)
		tenant, ok := server.Tenant(g, c.engine.Logger())
		if !ok {
			return
		}
		c.engine.Metrics().LegacyRequests.WithLabelValues(tenant, c.res.Name).Inc()
		key, present, err := framework.IdempotencyKey(g.Request.Header)
		if err == nil && !present {
			err = framework.Errorf(wire.CodeIdempotencyKeyMissing, "this route requires an Idempotency-Key header; prefer PUT %s/{uuid}", c.res.BasePath)
		}
		if err != nil {
			c.fail(g, "legacy_post", err)
			return
		}
		id := uuid.NewSHA1(namespace, []byte(key)) // LegacyID
		h.Set(wire.HeaderLink, "<"+c.location(id)+`>; rel="successor-version"`)
		if log := c.engine.Logger(); log.Enabled(g.Request.Context(), slog.LevelInfo) {
			// The key's hash is computed only for a log that keeps it.
			log.LogAttrs(g.Request.Context(), slog.LevelInfo, "legacy route used",
				slog.String("tenant", tenant), slog.String("resource", c.res.Name),
				slog.String("key_sha256", telemetry.KeyHash(key)), slog.String("user_agent", g.Request.UserAgent()))
		}
		// A shallow copy: only these two entries change.
		header := make(http.Header, len(g.Request.Header)+1)
		for k, v := range g.Request.Header {
			header[k] = v
		}
		delete(header, "If-Match")
		header["If-None-Match"] = []string{"*"}
		c.serveCreate(g, "legacy_post", start, PutRequest[Cmd]{Tenant: tenant, ID: id, Header: header, keyReuse: true}, key)
	})
	return nil
}
