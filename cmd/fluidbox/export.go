package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/export"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// eventsExport is `fluidbox events export --since T --format ndjson|ocsf`:
// every event of every run at or after T, one JSON object a line, each
// run's events in seq order.
func eventsExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("events export", stderr, "events export --since DURATION|TIME [--format ndjson|ocsf]")
	f := addAPIFlags(fs, getenv)
	since := fs.String("since", "", "export events at or after this (RFC 3339, or a duration ago such as 24h); required")
	format := fs.String("format", "ndjson", "ndjson (fluidbox's schema) or ocsf (OCSF API Activity)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *since == "" {
		return usagef("--since is required")
	}
	if *format != "ndjson" && *format != "ocsf" {
		return usagef("--format must be ndjson or ocsf, not %q", *format)
	}
	from, err := parseTime(*since, time.Now())
	if err != nil {
		return err
	}
	start, _ := time.Parse(time.RFC3339, from)
	c, err := f.client()
	if err != nil {
		return err
	}
	// A run created before the window can have events inside it, so every
	// run is read; its events before the window are skipped.
	runs, _, err := readPages(ctx, c, "/v1/sessions", "sessions", url.Values{"limit": {"100"}}, "", true, io.Discard)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for _, raw := range runs {
		var r struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || r.ID == "" {
			return fmt.Errorf("the answer of GET /v1/sessions has a run without an id")
		}
		for cur := int64(0); ; {
			page, err := c.Events(ctx, r.ID, cur, 1000, 0)
			if err != nil {
				return explain(err)
			}
			for _, e := range page.Events {
				if at, err := time.Parse(time.RFC3339Nano, e.At); err != nil || at.Before(start) {
					continue
				}
				// The same line as the stack's delivery to S3 writes.
				var v any = export.NewLine(r.ID, e.Seq, e.Type, e.At, e.Data)
				if *format == "ocsf" {
					v = toOCSF(r.ID, e)
				}
				if err := enc.Encode(v); err != nil {
					return err
				}
			}
			if len(page.Events) == 0 || page.Events[len(page.Events)-1].Seq >= page.LastSeq {
				break
			}
			cur = page.Events[len(page.Events)-1].Seq
		}
	}
	return nil
}

// OCSF: every event is an API Activity (class 6003, category 6,
// Application Activity) of fluidbox's API, activity Other (99); decisions
// and approvals carry a disposition. docs/ledger-export.md maps each field.
const (
	ocsfVersion       = "1.3.0"
	ocsfClassAPI      = 6003
	ocsfCategoryApp   = 6
	ocsfActivityOther = 99

	ocsfDispositionAllowed = 1
	ocsfDispositionBlocked = 2
	ocsfDispositionApprove = 8
	ocsfDispositionDelayed = 14

	ocsfStatusUnknown = 0
	ocsfStatusSuccess = 1
	ocsfStatusFailure = 2

	ocsfSeverityInformational = 1
)

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
}

type ocsfMetadata struct {
	Version        string      `json:"version"`
	Product        ocsfProduct `json:"product"`
	UID            string      `json:"uid"`
	CorrelationUID string      `json:"correlation_uid"`
	EventCode      string      `json:"event_code"`
	Sequence       int64       `json:"sequence"`
}

type ocsfAPI struct {
	Operation string `json:"operation"`
}

type ocsfSession struct {
	UID string `json:"uid"`
}

type ocsfActor struct {
	Session ocsfSession `json:"session"`
	// User is who decided an approval (approval.decided's decided_by).
	User *ocsfUser `json:"user,omitempty"`
}

type ocsfUser struct {
	Name string `json:"name"`
}

type ocsfEvent struct {
	ClassUID      int             `json:"class_uid"`
	CategoryUID   int             `json:"category_uid"`
	ActivityID    int             `json:"activity_id"`
	ActivityName  string          `json:"activity_name"`
	TypeUID       int             `json:"type_uid"`
	Time          int64           `json:"time"`
	SeverityID    int             `json:"severity_id"`
	StatusID      int             `json:"status_id"`
	DispositionID int             `json:"disposition_id,omitempty"`
	Message       string          `json:"message"`
	Metadata      ocsfMetadata    `json:"metadata"`
	API           ocsfAPI         `json:"api"`
	Actor         ocsfActor       `json:"actor"`
	Unmapped      json.RawMessage `json:"unmapped"`
}

// toOCSF maps one event. The whole redacted event stays in unmapped, so
// nothing the ndjson line has is lost.
func toOCSF(run string, e client.Event) ocsfEvent {
	var d struct {
		ToolName  string `json:"tool_name"`
		DecidedBy string `json:"decided_by"`
	}
	_ = json.Unmarshal(e.Data, &d)
	// Each event type's own field, read strictly: an unknown value is
	// left zero, which maps to no disposition or to blocked.
	var typed struct {
		Decision vocab.Decision       `json:"decision"`
		Status   vocab.ApprovalStatus `json:"status"`
	}
	at, _ := time.Parse(time.RFC3339Nano, e.At)
	out := ocsfEvent{
		ClassUID: ocsfClassAPI, CategoryUID: ocsfCategoryApp, ActivityID: ocsfActivityOther, ActivityName: e.Type,
		TypeUID: ocsfClassAPI*100 + ocsfActivityOther, Time: at.UnixMilli(), SeverityID: ocsfSeverityInformational,
		StatusID: ocsfStatusSuccess, Message: e.Type,
		Metadata: ocsfMetadata{Version: ocsfVersion, Product: ocsfProduct{Name: "fluidbox", VendorName: "fluidbox"},
			UID: fmt.Sprintf("%s:%d", run, e.Seq), CorrelationUID: run, EventCode: e.Type, Sequence: e.Seq},
		API:      ocsfAPI{Operation: d.ToolName},
		Actor:    ocsfActor{Session: ocsfSession{UID: run}},
		Unmapped: e.Data,
	}
	switch e.Type {
	case "tool.decision":
		_ = json.Unmarshal(e.Data, &typed)
		out.Message = d.ToolName + " " + string(typed.Decision)
		switch typed.Decision {
		case vocab.Allow:
			out.DispositionID = ocsfDispositionAllowed
		case vocab.Deny:
			out.DispositionID, out.StatusID = ocsfDispositionBlocked, ocsfStatusFailure
		}
	case "approval.requested":
		out.Message = d.ToolName + " awaits approval"
		out.DispositionID, out.StatusID = ocsfDispositionDelayed, ocsfStatusUnknown
	case "approval.decided":
		_ = json.Unmarshal(e.Data, &typed)
		out.Message = "approval " + string(typed.Status)
		if d.DecidedBy != "" {
			out.Actor.User = &ocsfUser{Name: d.DecidedBy}
		}
		if typed.Status.Approved() {
			out.DispositionID = ocsfDispositionApprove
		} else { // denied, expired
			out.DispositionID, out.StatusID = ocsfDispositionBlocked, ocsfStatusFailure
		}
	}
	return out
}
