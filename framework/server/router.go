package server

import (
	"fmt"
	"log/slog"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
)

// NoRoute returns the gin handler for requests that match no route: 404
// not_found as application/problem+json. Install it with router.NoRoute.
func NoRoute(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		framework.WriteProblem(c.Writer, c.Request, logger, framework.Errorf(wire.CodeNotFound, "no route %s %s", c.Request.Method, c.Request.URL.Path))
	}
}

// NoMethod returns the gin handler for a known path with a method it does
// not serve: 405 method_not_allowed as application/problem+json, with the
// Allow header gin sets to the methods the path has. Install it with
// router.NoMethod and set router.HandleMethodNotAllowed = true.
func NoMethod(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		framework.WriteProblem(c.Writer, c.Request, logger, framework.Errorf(wire.CodeMethodNotAllowed, "%s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	}
}

// Recovery returns gin middleware that turns a panic of a handler into a
// 500 internal problem, logged with its value; the client sees only a
// generic detail.
func Recovery(logger *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, recovered any) {
		framework.WriteProblem(c.Writer, c.Request, logger, fmt.Errorf("panic: %v", recovered))
		c.Abort()
	})
}

// UseProblemHandlers makes every answer of router that no handler of the
// application writes a problem: it installs [Recovery], [NoRoute] and
// [NoMethod] and turns on router.HandleMethodNotAllowed. Call it before
// registering routes.
func UseProblemHandlers(router *gin.Engine, logger *slog.Logger) {
	router.HandleMethodNotAllowed = true
	router.Use(Recovery(logger))
	router.NoRoute(NoRoute(logger))
	router.NoMethod(NoMethod(logger))
}
