package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	var req run.CreateRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	v, err := s.runs.Create(r.Context(), who, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	v, err := s.runs.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) endSession(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	body, e := readBody(w, r)
	if e != nil {
		return e
	}
	if len(body) == 0 {
		err = s.runs.End(r.Context(), who, id)
	} else {
		// A runner ending its run says how the agent finished.
		var req endRequest
		if e := route.DecodeBytes(body, &req); e != nil {
			return e
		}
		if req.Reason == "" || req.ExitStatus == nil {
			return invalid("reason and exit_status are required in a body (or send none)")
		}
		err = s.runs.EndWithResult(r.Context(), who, id, run.Result{Reason: run.EndReason(req.Reason), ExitStatus: *req.ExitStatus, FinalMessage: req.FinalMessage})
	}
	var inv *run.InvalidError
	if errors.As(err, &inv) {
		return invalid("%s", inv.Error())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]vocab.RunStatus{"status": vocab.Ended})
	return nil
}

// endRequest is the optional body of POST /v1/sessions/{id}/end: how the
// run's agent finished, from its runner.
type endRequest struct {
	Reason       string `json:"reason"`
	ExitStatus   *int   `json:"exit_status"`
	FinalMessage string `json:"final_message,omitempty"`
}

type eventView struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	At   string          `json:"at"`
	Data json.RawMessage `json:"data"`
}

func eventsOut(events []store.Event) []eventView {
	out := make([]eventView, len(events))
	for i, e := range events {
		out[i] = eventView{Seq: e.Seq, Type: e.Type, At: e.At, Data: json.RawMessage(e.Data)}
	}
	return out
}

// Limits of an events read.
const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
)

type eventsQuery struct {
	after int64
	limit int
	wait  time.Duration
}

func parseEventsQuery(r *http.Request) (eventsQuery, error) {
	q := eventsQuery{limit: defaultEventLimit}
	v := r.URL.Query()
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, invalid("after: must be a non-negative integer")
		}
		q.after = n
	}
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, invalid("Last-Event-ID: must be a non-negative integer")
		}
		q.after = max(q.after, n)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxEventLimit {
			return q, invalid("limit: must be an integer from 1 to %d", maxEventLimit)
		}
		q.limit = n
	}
	wait, e := waitSeconds(v.Get("wait_seconds"), ledger.MaxWait)
	if e != nil {
		return q, e
	}
	q.wait = wait
	return q, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	q, err := parseEventsQuery(r)
	if err != nil {
		return err
	}
	if _, err := s.runs.Get(r.Context(), id); err != nil {
		return err
	}
	if r.Header.Get("Accept") == "text/event-stream" {
		return s.stream(w, r, id, q)
	}
	events, last, err := s.led.Read(r.Context(), id, q.after, q.limit, q.wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": eventsOut(events), "last_seq": last})
	return nil
}

// streamWait is how long one SSE read waits before a keep-alive comment.
const streamWait = 15 * time.Second

// stream serves a run's events as server-sent events, each with its seq as
// the event id, so a client that reconnects with Last-Event-ID resumes
// exactly after the last event it got.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, q eventsQuery) error {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	var stop <-chan time.Time
	if s.cfg.SSEMaxDuration > 0 {
		t := time.NewTimer(s.cfg.SSEMaxDuration)
		defer t.Stop()
		stop = t.C
	}
	after := q.after
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		default:
		}
		wait := streamWait
		if s.cfg.SSEMaxDuration > 0 {
			wait = min(wait, s.cfg.SSEMaxDuration)
		}
		events, _, err := s.led.Read(ctx, id, after, q.limit, wait)
		if err != nil {
			if ctx.Err() == nil {
				s.log.ErrorContext(ctx, "event stream", "run", id, "err", err)
			}
			return nil // the stream has started: a status can no longer be sent
		}
		for _, e := range eventsOut(events) {
			data, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data); err != nil {
				return nil
			}
			after = e.Seq
		}
		if len(events) == 0 {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
