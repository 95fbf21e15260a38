package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/outbox"
)

// errEventNotParked is outbox.ErrNotParked, for the exit code table.
var errEventNotParked = outbox.ErrNotParked

type parkedJSON struct {
	ID            string          `json:"id"`
	Tenant        string          `json:"tenant"`
	Type          string          `json:"type"`
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	Seq           int64           `json:"seq"`
	Attempts      int             `json:"attempts"`
	LastError     string          `json:"last_error"`
	CreatedAt     time.Time       `json:"created_at"`
	ParkedAt      time.Time       `json:"parked_at"`
	Payload       json.RawMessage `json:"payload"`
}

func outboxList(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	parked := fs.Bool("parked", false, "list the parked events (required: pending events are the relay's)")
	limit := fs.Int("limit", 100, "list at most this many events")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 || !*parked || *limit <= 0 {
			return usageErr("usage: outbox list -parked [-limit N] (a positive limit)")
		}
		db, err := c.open(ctx, false, true)
		if err != nil {
			return err
		}
		defer db.Close()
		evs, err := outbox.ListParked(ctx, db, *limit)
		if err != nil {
			return err
		}
		out := make([]parkedJSON, len(evs))
		for i, ev := range evs {
			out[i] = parkedJSON{ID: ev.ID.String(), Tenant: ev.Tenant, Type: ev.Type, AggregateType: ev.AggregateType,
				AggregateID: ev.AggregateID, Seq: ev.Seq, Attempts: ev.Attempts, LastError: ev.LastError,
				CreatedAt: ev.CreatedAt, ParkedAt: ev.ParkedAt, Payload: ev.Payload}
		}
		if c.json {
			return c.printJSON(out)
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTENANT\tTYPE\tAGGREGATE\tSEQ\tATTEMPTS\tPARKED\tLAST_ERROR")
		for _, ev := range out {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%d\t%d\t%s\t%s\n", ev.ID, ev.Tenant, ev.Type, ev.AggregateType, ev.AggregateID,
				ev.Seq, ev.Attempts, ev.ParkedAt.Format(time.RFC3339), ev.LastError)
		}
		return w.Flush()
	}
}

func outboxRequeue(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	all := fs.Bool("all", false, "requeue every parked event")
	return func(ctx context.Context, args []string) error {
		if *all == (len(args) > 0) {
			return usageErr("usage: outbox requeue ID... or outbox requeue -all")
		}
		ids := make([]uuid.UUID, 0, len(args))
		for _, a := range args {
			id, err := uuid.Parse(a)
			if err != nil {
				return usageErr("%q is not an event ID (a UUID)", a)
			}
			ids = append(ids, id)
		}
		db, err := c.open(ctx, false, true)
		if err != nil {
			return err
		}
		defer db.Close()
		if *all {
			stats, err := outbox.ReadStats(ctx, db)
			if err != nil {
				return err
			}
			// The events parked now; any parked later waits for the next
			// run, so that the loop ends.
			evs, err := outbox.ListParked(ctx, db, int(max(1, stats.Parked)))
			if err != nil {
				return err
			}
			for _, ev := range evs {
				ids = append(ids, ev.ID)
			}
		}
		bar := c.bar(int64(len(ids)), "requeueing")
		var (
			requeued []string
			errs     []error
		)
		for _, id := range ids {
			if err := outbox.Requeue(ctx, db, id, time.Now()); err != nil {
				errs = append(errs, err)
			} else {
				requeued = append(requeued, id.String())
			}
			_ = bar.Add(1)
		}
		_ = bar.Finish()
		if c.json {
			if err := c.printJSON(map[string]any{"requeued": requeued}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(c.stdout, "requeued %d event(s)\n", len(requeued))
		}
		return errors.Join(errs...)
	}
}

func outboxStats(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErr("outbox stats takes no arguments")
		}
		db, err := c.open(ctx, false, true)
		if err != nil {
			return err
		}
		defer db.Close()
		st, err := outbox.ReadStats(ctx, db)
		if err != nil {
			return err
		}
		var age time.Duration
		if !st.OldestPending.IsZero() {
			age = max(0, time.Since(st.OldestPending)).Round(time.Millisecond)
		}
		if c.json {
			return c.printJSON(map[string]any{"pending": st.Pending, "parked": st.Parked, "oldest_pending_age_seconds": age.Seconds()})
		}
		fmt.Fprintf(c.stdout, "pending %d\nparked %d\noldest pending age %s\n", st.Pending, st.Parked, age)
		return nil
	}
}
