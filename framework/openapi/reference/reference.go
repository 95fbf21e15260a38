package reference

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5emb"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/openapi"
)

// DefaultPath is where the page is served unless [Config.Path] says
// otherwise.
const DefaultPath = "/docs"

// Config configures [New].
type Config struct {
	// Path is the URL path of the page, without a trailing slash: the page
	// is at Path + "/", its assets and the document under it. Defaults to
	// [DefaultPath].
	Path string
	// Title is the page's title. Defaults to the document's title.
	Title string
}

// Handler serves the reference page, its assets and the document.
type Handler struct {
	path string
	doc  *openapi.Document
	ui   http.Handler
}

// New returns the handler of the reference page of doc. A Path that is
// not absolute, or ends with a slash, is an error.
func New(doc *openapi.Document, cfg Config) (*Handler, error) {
	if doc == nil {
		return nil, errors.New("reference: the document is nil")
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if !strings.HasPrefix(cfg.Path, "/") || strings.HasSuffix(cfg.Path, "/") || strings.ContainsAny(cfg.Path, "?#") {
		return nil, fmt.Errorf("reference: Config.Path %q: want an absolute path without a trailing slash (/docs)", cfg.Path)
	}
	if cfg.Title == "" {
		cfg.Title = doc.T().Info.Title
	}
	ui := v5emb.NewHandlerWithConfig(swgui.Config{
		Title:       cfg.Title,
		SwaggerJSON: cfg.Path + "/openapi.json",
		BasePath:    cfg.Path + "/",
		SettingsUI: map[string]string{
			// Every operation open, with its parameters and answers: what
			// a reader looks for (the headers, the problem codes) shows
			// without a click.
			"docExpansion": `"full"`,
		},
	})
	return &Handler{path: cfg.Path, doc: doc, ui: ui}, nil
}

// ServeHTTP serves GET and HEAD: the page at Path and Path + "/", the
// document at Path + "/openapi.json", the page's assets under Path. Any
// other method is 405 method_not_allowed.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		framework.WriteProblem(w, r, nil, framework.ErrMethodNotAllowed)
		return
	}
	if r.URL.Path == h.path+"/openapi.json" {
		h.doc.ServeHTTP(w, r)
		return
	}
	h.ui.ServeHTTP(w, r)
}
