package retrysafetest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
)

// Note is a service's own resource: PUT /v1/notes/{id} creates or
// replaces a note, PATCH /v1/notes/{id} changes one.
type Note struct {
	collection.System
	Title string `json:"title" validate:"required,max=100" gorm:"not null"`
	Stars int    `json:"stars" validate:"min=0,max=5" gorm:"not null"`
}

// notesService is the service: its routes on its database.
func notesService(db *store.DB) (http.Handler, error) {
	if err := db.Gorm.AutoMigrate(&Note{}); err != nil { // or a goose migration
		return nil, err
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		return nil, err
	}
	notes, err := collection.New(engine, collection.Resource[Note, Note]{Name: "notes"})
	if err != nil {
		return nil, err
	}
	auth, err := server.NewStaticTokens(map[string]string{"sk_acme": "acme", "sk_globex": "globex"})
	if err != nil {
		return nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	notes.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))
	return router, nil
}

// notesKeepTheirPromises is the test a service adds to its suite, as
// func TestNotesKeepTheirPromises(t *testing.T): the kit checks PUT
// /v1/notes/{id} under lost answers, concurrent requests, member names
// spelled otherwise, another tenant and a conditional replace. Every
// create and replace moves a note's version by one, so the sum of the
// versions counts the effects.
func notesKeepTheirPromises(t *testing.T, dsn string) {
	db, err := store.Open(t.Context(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	handler, err := notesService(db)
	if err != nil {
		t.Fatal(err)
	}
	retrysafetest.Run(t, retrysafetest.Config{
		Handler: handler,
		Tenants: [2]retrysafetest.Tenant{retrysafetest.Bearer("acme", "sk_acme"), retrysafetest.Bearer("globex", "sk_globex")},
		Operation: retrysafetest.Operation{
			Kind:      retrysafetest.PutCreateOrReplace,
			Path:      "/v1/notes/{id}",
			Body:      []byte(`{"title":"Ring the bell","stars":3}`),
			OtherBody: []byte(`{"title":"Ring the bell twice","stars":4}`),
		},
		CountFunc: func(ctx context.Context, tenant string) (n int64, err error) {
			err = db.Gorm.WithContext(ctx).Model(&Note{}).Where("tenant_id = ?", tenant).
				Select("COALESCE(SUM(version), 0)").Scan(&n).Error
			return n, err
		},
	})
}

// Example shows by hand what the kit's LostAnswer check does: the proxy
// lets the service create the note, then loses the answer; the retry gets
// it byte for byte, as a replay. TestExample runs notesKeepTheirPromises.
func Example() {
	dir, _ := os.MkdirTemp("", "retrysafetest-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "notes.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	handler, err := notesService(db)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	var once sync.Once
	lost := make(chan []byte, 1)
	proxy, err := retrysafetest.StartProxy(strings.TrimPrefix(srv.URL, "http://"), retrysafetest.ProxyConfig{
		DropAnswerFunc: func(_ *http.Request, answer []byte) (drop bool) {
			once.Do(func() { lost <- answer; drop = true }) // the first answer is lost
			return drop
		},
	})
	if err != nil {
		panic(err)
	}
	defer proxy.Close()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	put := func() (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodPut, "http://"+proxy.Addr()+"/v1/notes/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
			strings.NewReader(`{"title":"Ring the bell","stars":3}`))
		req.Header.Set("Authorization", "Bearer sk_acme")
		res, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		return res, body, err
	}
	_, _, err = put()
	fmt.Println("first attempt:", err != nil)
	first, firstBody, _ := retrysafetest.ReadAnswer(<-lost)
	fmt.Println("the answer lost:", first.StatusCode)
	res, body, err := put()
	if err != nil {
		panic(err)
	}
	fmt.Println("retry:", res.StatusCode, res.Header.Get("Idempotent-Replayed"), string(body) == string(firstBody))
	// Output:
	// first attempt: true
	// the answer lost: 201
	// retry: 201 true true
}
