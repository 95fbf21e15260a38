package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/migrations"
)

func janitorRun(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	dryRun := fs.Bool("dry-run", false, "count the expired records, delete nothing")
	batch := fs.Int("batch", postkeys.DefaultCleanupBatchSize, "records one DELETE removes")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 || *batch <= 0 {
			return usageErr("usage: janitor run [-dry-run] [-batch N] (a positive batch)")
		}
		db, err := c.openRecords(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		expired, err := db.Driver.Records().CountExpired(ctx, db.Gorm)
		if err != nil {
			return db.Classify(err)
		}
		if *dryRun {
			if c.json {
				return c.printJSON(map[string]any{"dry_run": true, "expired": expired})
			}
			fmt.Fprintf(c.stdout, "%d expired record(s) would be deleted\n", expired)
			return nil
		}
		bar := c.bar(expired, "deleting expired records")
		stats, err := postkeys.Cleanup(ctx, db, *batch, func(n int64) { _ = bar.Add64(n) })
		_ = bar.Finish()
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(map[string]any{"dry_run": false, "deleted": stats.Deleted, "batches": stats.Batches})
		}
		fmt.Fprintf(c.stdout, "deleted %d expired record(s) in %d batch(es)\n", stats.Deleted, stats.Batches)
		return nil
	}
}

func migrateStatus(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErr("migrate status takes no arguments")
		}
		db, err := c.open(ctx, false, false)
		if err != nil {
			return err
		}
		defer db.Close()
		status, err := migrations.Status(ctx, db)
		if err != nil {
			return db.Classify(err)
		}
		if c.json {
			type row struct {
				Version   int64      `json:"version"`
				Name      string     `json:"name"`
				Applied   bool       `json:"applied"`
				AppliedAt *time.Time `json:"applied_at"`
			}
			out := make([]row, len(status))
			for i, m := range status {
				out[i] = row{Version: m.Version, Name: m.Name, Applied: m.Applied}
				if m.Applied {
					t := m.AppliedAt.UTC()
					out[i].AppliedAt = &t
				}
			}
			return c.printJSON(out)
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VERSION\tNAME\tSTATE")
		for _, m := range status {
			state := "pending"
			if m.Applied {
				state = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\n", m.Version, m.Name, state)
		}
		return w.Flush()
	}
}

func migrateUp(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErr("migrate up takes no arguments")
		}
		db, err := c.open(ctx, true, false)
		if err != nil {
			return err
		}
		defer db.Close()
		before, err := migrations.Status(ctx, db)
		if err != nil {
			return db.Classify(err)
		}
		if err := migrations.Up(ctx, db); err != nil {
			return db.Classify(err)
		}
		var applied []string
		for _, m := range before {
			if !m.Applied {
				applied = append(applied, m.Name)
			}
		}
		if c.json {
			return c.printJSON(map[string]any{"applied": applied})
		}
		fmt.Fprintf(c.stdout, "applied %d migration(s)\n", len(applied))
		for _, name := range applied {
			fmt.Fprintln(c.stdout, "  "+name)
		}
		return nil
	}
}

// openAPI prints the demo's OpenAPI document: the demo is built, as
// cmd/demo builds it, on a scratch SQLite database that is removed
// afterwards, and its /openapi.json is served once. It needs no -db.
func openAPI(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErr("openapi takes no arguments")
		}
		gin.SetMode(gin.ReleaseMode)
		dir, err := os.MkdirTemp("", "retrysafe-openapi-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		a, err := app.New(ctx, app.Config{DSN: "sqlite:" + filepath.Join(dir, "openapi.db")})
		if err != nil {
			return err
		}
		defer a.Close()
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/openapi.json", nil))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("the demo answered %d for /openapi.json", rec.Code)
		}
		_, err = c.stdout.Write(rec.Body.Bytes())
		return err
	}
}
