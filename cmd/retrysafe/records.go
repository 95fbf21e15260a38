package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"
)

// recordJSON is a record as -json prints it: the key's SHA-256, and the
// raw key only with -show-keys.
type recordJSON struct {
	Tenant        string `json:"tenant"`
	Operation     string `json:"operation"`
	KeySHA256     string `json:"key_sha256"`
	Key           string `json:"key,omitempty"`
	State         string `json:"state"`
	RecoveryPoint string `json:"recovery_point"`
	Attempt       int64  `json:"attempt"`
	Fence         int64  `json:"fence"`
	// LockedUntil is the lease (null when none); LeaseExpired says whether
	// it had passed on the database clock.
	LockedUntil  *time.Time `json:"locked_until"`
	LeaseExpired bool       `json:"lease_expired"`
	Expired      bool       `json:"expired"`
	ResourceRef  string     `json:"resource_ref,omitempty"`
	ErrorCode    string     `json:"error_code,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	// The stored answer (show only).
	Response *responseJSON `json:"response,omitempty"`
}

type responseJSON struct {
	Status    int         `json:"status"`
	Header    http.Header `json:"header"`
	Body      string      `json:"body"`
	Truncated bool        `json:"truncated"`
}

func toJSON(r store.RecordRow, showKey, withResponse bool) recordJSON {
	out := recordJSON{Tenant: r.ID.Tenant, Operation: r.ID.Operation, KeySHA256: telemetry.KeyHash(r.ID.Key), State: string(r.State),
		RecoveryPoint: r.RecoveryPoint, Attempt: r.Attempt, Fence: r.Fence, LeaseExpired: r.LeaseExpired, Expired: r.Expired,
		ResourceRef: r.ResourceRef, ErrorCode: r.ErrorCode, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt}
	if showKey {
		out.Key = r.ID.Key
	}
	if !r.LockedUntil.IsZero() {
		t := r.LockedUntil
		out.LockedUntil = &t
	}
	if withResponse && r.ResponseStatus != 0 {
		// The POST fallback stores the header as a JSON object.
		var header http.Header
		_ = json.Unmarshal([]byte(r.ResponseHeaders), &header)
		out.Response = &responseJSON{Status: r.ResponseStatus, Header: header, Body: string(r.ResponseBody), Truncated: r.Truncated}
	}
	return out
}

// openRecords opens the migrated database.
func (c *cli) openRecords(ctx context.Context) (*store.DB, error) { return c.open(ctx, false, true) }

func recordsList(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	var p store.RecordListParams
	var state string
	fs.StringVar(&p.Tenant, "tenant", "", "only this tenant's records")
	fs.StringVar(&p.Operation, "operation", "", `only this operation's records ("payments.create")`)
	fs.StringVar(&state, "state", "", "only records in this state: in_progress, unknown or completed")
	fs.DurationVar(&p.OlderThan, "older-than", 0, "only records created at least this long ago (database clock)")
	fs.IntVar(&p.Limit, "limit", 100, "list at most this many records")
	showKeys := fs.Bool("show-keys", false, "print the raw idempotency keys (default: their SHA-256 only)")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErr("records list takes no arguments, got %q", args)
		}
		switch store.RecordState(state) {
		case "", store.RecordInProgress, store.RecordUnknown, store.RecordCompleted:
			p.State = store.RecordState(state)
		default:
			return usageErr("-state %q: want in_progress, unknown or completed", state)
		}
		if p.Limit <= 0 || p.OlderThan < 0 {
			return usageErr("-limit must be positive and -older-than not negative")
		}
		db, err := c.openRecords(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		recs, err := db.Driver.Records().List(ctx, db.Gorm, &p)
		if err != nil {
			return db.Classify(err)
		}
		out := make([]recordJSON, len(recs))
		for i, r := range recs {
			out[i] = toJSON(r, *showKeys, false)
		}
		if c.json {
			return c.printJSON(out)
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		keyColumn := "KEY_SHA256"
		if *showKeys {
			keyColumn = "KEY"
		}
		fmt.Fprintf(w, "TENANT\tOPERATION\t%s\tSTATE\tPOINT\tATTEMPT\tFENCE\tCREATED\tLEASE\n", keyColumn)
		for _, r := range out {
			key := r.KeySHA256[:16]
			if *showKeys {
				key = r.Key
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Tenant, r.Operation, key, r.State, r.RecoveryPoint,
				r.Attempt, r.Fence, r.CreatedAt.Format(time.RFC3339), lease(r))
		}
		return w.Flush()
	}
}

func lease(r recordJSON) string {
	switch {
	case r.LockedUntil == nil:
		return "-"
	case r.LeaseExpired:
		return "expired " + r.LockedUntil.Format(time.RFC3339)
	}
	return "live until " + r.LockedUntil.Format(time.RFC3339)
}

// recordFlags declares the flags that name one record.
func recordFlags(fs *flag.FlagSet) *store.RecordKey {
	var id store.RecordKey
	fs.StringVar(&id.Tenant, "tenant", "", "the record's tenant (required)")
	fs.StringVar(&id.Operation, "operation", "", `the record's operation, e.g. "payments.create" (required)`)
	fs.StringVar(&id.Key, "key", "", "the idempotency key (required)")
	return &id
}

func checkID(id *store.RecordKey, args []string) error {
	if len(args) > 0 {
		return usageErr("unexpected arguments %q", args)
	}
	if id.Tenant == "" || id.Operation == "" || id.Key == "" {
		return usageErr("-tenant, -operation and -key are required")
	}
	return nil
}

func recordsShow(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	id := recordFlags(fs)
	return func(ctx context.Context, args []string) error {
		if err := checkID(id, args); err != nil {
			return err
		}
		db, err := c.openRecords(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		rec, found, err := db.Driver.Records().Get(ctx, db.Gorm, &store.RecordGetParams{ID: *id})
		if err != nil {
			return db.Classify(err)
		}
		if !found {
			return fmt.Errorf("%w: tenant %q, operation %q, key sha256 %s", postkeys.ErrRecordNotFound, id.Tenant, id.Operation,
				telemetry.KeyHash(id.Key))
		}
		out := toJSON(rec, false, true)
		if c.json {
			return c.printJSON(out)
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		rows := [][2]string{{"tenant", out.Tenant}, {"operation", out.Operation}, {"key_sha256", out.KeySHA256},
			{"state", out.State}, {"recovery_point", out.RecoveryPoint}, {"attempt", fmt.Sprint(out.Attempt)},
			{"fence", fmt.Sprint(out.Fence)}, {"lease", lease(out)}, {"resource_ref", out.ResourceRef},
			{"error_code", out.ErrorCode}, {"created_at", out.CreatedAt.Format(time.RFC3339Nano)},
			{"updated_at", out.UpdatedAt.Format(time.RFC3339Nano)}, {"expires_at", out.ExpiresAt.Format(time.RFC3339Nano)}}
		if r := out.Response; r != nil {
			rows = append(rows, [2]string{"response_status", fmt.Sprint(r.Status)},
				[2]string{"response_content_type", r.Header.Get("Content-Type")}, [2]string{"response_body", r.Body})
		}
		for _, row := range rows {
			fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
		}
		return w.Flush()
	}
}

func recordsResolve(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	id := recordFlags(fs)
	p := postkeys.ResolveParams{}
	var outcome, body, code string
	fs.StringVar(&outcome, "outcome", "", "succeeded or failed (required)")
	fs.StringVar(&p.Reference, "reference", "", "succeeded: what the operation produced, e.g. the provider's charge ID (required)")
	fs.IntVar(&p.Status, "status", 0, "succeeded: the 2xx status the record answers (default 200)")
	fs.StringVar(&body, "body", "", `succeeded: the JSON body the record answers, or @FILE, checked as a request body is (default {"reference":REF})`)
	fs.StringVar(&code, "code", "", "failed: the problem code the record answers: final, and generic or declared by the record's operation (e.g. card_declined)")
	fs.StringVar(&p.Detail, "detail", "", "failed: the problem's detail")
	fs.StringVar(&p.Actor, "actor", "", "who resolves, for the audit row (default $USER, else the operating system's user name)")
	fs.StringVar(&p.Reason, "reason", "", "why, for the audit row (required)")
	fs.DurationVar(&p.TTL, "ttl", framework.DefaultRetention().ReplayWindow,
		fmt.Sprintf("replay window of the resolved record, at least the lease (%v)", postkeys.DefaultResolveLease))
	return func(ctx context.Context, args []string) error {
		if err := checkID(id, args); err != nil {
			return err
		}
		p.ID, p.Outcome, p.Code = *id, postkeys.Outcome(outcome), wire.Code(code)
		if p.Actor == "" {
			p.Actor = c.actor()
		}
		if strings.TrimSpace(p.Actor) == "" {
			return usageErr("who resolves is not known: pass -actor NAME ($USER is not set and the operating system has no name for this user)")
		}
		if file, ok := strings.CutPrefix(body, "@"); ok {
			b, err := os.ReadFile(file)
			if err != nil {
				return usageErr("-body: %v", err)
			}
			p.Body = b
		} else if body != "" {
			p.Body = []byte(body)
		}
		db, err := c.openRecords(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		var published bool
		if p.Codes, published, err = postkeys.PublishedCodes(ctx, db, p.ID.Operation); err != nil {
			return err
		}
		if _, known := p.Codes.Lookup(p.Code); p.Outcome == postkeys.OutcomeFailed && !known && !published {
			return usageErr("code %q is not a generic code, and no service has published what operation %q declares "+
				"(a service publishes its operations' codes when its postkeys adapter starts, or with Adapter.PublishOperations)",
				p.Code, p.ID.Operation)
		}
		res, err := postkeys.Resolve(ctx, db, p)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(map[string]any{"tenant": id.Tenant, "operation": id.Operation, "key_sha256": telemetry.KeyHash(id.Key),
				"from": res.From, "outcome": p.Outcome, "fence": res.Fence, "status": res.Status, "body": string(res.Body)})
		}
		fmt.Fprintf(c.stdout, "resolved (was %s): the next retry with this key answers %d %s\n", res.From, res.Status, res.Body)
		return nil
	}
}

// actor is who resolves when -actor is not given: $USER, else the
// operating system's name for the user the command runs as (a container
// sets no $USER), else "".
func (c *cli) actor() string {
	if name := c.getenv("USER"); name != "" {
		return name
	}
	if c.userName != nil {
		if name, err := c.userName(); err == nil {
			return name
		}
	}
	return ""
}
