// Package firing fires scheduled triggers: a trigger with a schedule
// starts a run at each due time of its expression, on the commit at the
// head of its branch at that moment, which the run freezes as a pull
// request's run freezes its head. Firing is a tick: something calls
// Schedules.Tick with the time (the dev server's ticker every few seconds;
// on AWS the schedule function, from an EventBridge rule every minute),
// and the tick fires, for each scheduled trigger, the latest due time that
// has passed.
//
// Guarantees, in order:
//
//  1. Exactly once. A due time fires only through a conditional write of
//     its claim, keyed by trigger and due time (store.ClaimFire), so two
//     dev processes over one table, or a retried invocation, fire it once.
//     The run's id is derived from the same key, and a run is written only
//     if its id is new, so a fire that stopped between its claim and its
//     run is finished by a later tick (for fireRetry) and never doubled.
//  2. Late fires, once. Of the due times missed while nothing ticked,
//     only the latest fires (a weekend's downtime makes one run on Monday,
//     not one per missed time), and only if it is at most Lookback old.
//  3. A changed or deleted trigger stops. The claim is written in one
//     transaction with a check that the trigger still holds the schedule
//     the tick read; a new expression counts from when it was set, so
//     nothing it would have been due at before fires.
//  4. The run is the trigger's run, as a pull request's is: the same
//     configuration, checked and frozen the same way (run.CreateForTrigger),
//     trigger "schedule", tier trusted narrowed by the configuration (the
//     branch is the repository's own, chosen by the operator), and it is
//     launched like one (RunCreated; on AWS the head's insert on the stream).
package firing

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/triggers"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/schedule"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// Lookback is how late a due time may still fire: EventBridge Scheduler's
// default maximum event age.
const Lookback = 24 * time.Hour

// fireRetry is how long after its claim a fire whose run was not created
// (GitHub unreachable, the process stopped) is tried again by later ticks.
const fireRetry = 10 * time.Minute

// Trigger is the trigger type of a run a schedule started.
const Trigger = "schedule"

var runIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// RunID is the id of the run trigger's schedule starts for due:
// 128 bits of a hash of both, so every process that fires the same due
// time names the same run.
func RunID(triggerID string, due time.Time) string {
	h := sha256.New()
	h.Write([]byte("fluidbox/schedule/v1\x00" + triggerID + "\x00" + store.FormatTime(due)))
	return "ses_" + strings.ToLower(runIDEncoding.EncodeToString(h.Sum(nil)[:16]))
}

// Config is what firing schedules needs.
type Config struct {
	route.Config
	// Sealer opens the GitHub App's key, which reads each branch's head.
	Sealer seal.Sealer
	// Egress decides where the GitHub App's hosts may be.
	Egress *egress.Guard
	// RunCreated, when set, is told of each run a schedule created.
	RunCreated func(context.Context, store.Head)
}

// Schedules fires scheduled triggers.
type Schedules struct {
	cfg  Config
	st   *store.Store
	runs *run.Service
	apps *githubapp.Apps
	log  *slog.Logger
}

// New builds the firing of scheduled triggers.
func New(cfg Config) *Schedules {
	cfg.Config = cfg.Config.WithDefaults()
	st := cfg.Ledger.Store()
	return &Schedules{cfg: cfg, st: st, runs: run.NewService(cfg.Ledger, cfg.Now),
		apps: githubapp.New(st, cfg.Sealer, cfg.Egress, cfg.Now), log: cfg.Logger}
}

// Ticked is what one tick did.
type Ticked struct {
	// Scheduled counts the triggers with a schedule.
	Scheduled int `json:"scheduled"`
	// Created lists the runs this tick created.
	Created []string `json:"created"`
	// Failed counts the due times that could not fire this tick (a later
	// tick tries again within fireRetry).
	Failed int `json:"failed"`
}

// Tick fires, for every scheduled trigger, its latest due time at or
// before now that has not fired. A failure of one trigger does not keep
// the others from firing; the error joins the store's failures.
func (s *Schedules) Tick(ctx context.Context, now time.Time) (Ticked, error) {
	ts, err := s.st.ScheduledTriggers(ctx)
	if err != nil {
		return Ticked{}, err
	}
	out := Ticked{Scheduled: len(ts)}
	var errs []error
	for _, t := range ts {
		id, err := s.fire(ctx, t, now)
		switch {
		case err != nil:
			out.Failed++
			errs = append(errs, err)
		case id != "":
			out.Created = append(out.Created, id)
		}
	}
	return out, errors.Join(errs...)
}

// fire fires t's latest due time, if it has not fired, and returns the
// run it created ("" for none).
func (s *Schedules) fire(ctx context.Context, t store.Trigger, now time.Time) (string, error) {
	expr, err := schedule.Parse(t.Schedule)
	if err != nil {
		// Stored only after the same check: a newer version reads
		// differently. Never fire what is not understood.
		s.log.ErrorContext(ctx, "schedule: stored expression does not parse", "trigger", t.ID, "err", err)
		return "", nil
	}
	since, err := time.Parse(store.TimeLayout, t.ScheduleSince)
	if err != nil {
		s.log.ErrorContext(ctx, "schedule: stored schedule_since does not parse", "trigger", t.ID)
		return "", nil
	}
	due, ok := expr.Latest(since, now, Lookback)
	if !ok {
		return "", nil
	}
	f := store.Fire{TriggerID: t.ID, Due: store.FormatTime(due), RunID: RunID(t.ID, due), ClaimedAt: store.FormatTime(now),
		Expires: due.Add(Lookback + 24*time.Hour).Unix()}
	err = s.st.ClaimFire(ctx, f, t)
	switch {
	case errors.Is(err, store.ErrFireClaimed):
		if done, err := s.fired(ctx, f, now); done || err != nil {
			return "", err
		}
	case errors.Is(err, store.ErrTriggerChanged):
		return "", nil
	case err != nil:
		return "", err
	}
	sha, branch, err := s.apps.BranchHead(ctx, t.Repository, t.Ref)
	if err != nil {
		s.log.WarnContext(ctx, "schedule: read the branch's head", "trigger", t.ID, "due", f.Due, "err", err)
		return "", fmt.Errorf("schedule: trigger %s at %s: %w", t.ID, f.Due, err)
	}
	v, err := s.runs.CreateForTrigger(ctx, triggers.RunRequest(t), run.Triggered{
		RunID:   f.RunID,
		Type:    Trigger,
		Invoker: string(auth.Trigger(t.ID)),
		Tier:    trust.Trusted,
		GitHub: &store.GitHubTrigger{
			TriggerID:      t.ID,
			Event:          Trigger,
			Repository:     t.Repository,
			HeadRepository: t.Repository,
			HeadSHA:        sha,
			Ref:            branch,
			ScheduledFor:   f.Due,
		},
	})
	if errors.Is(err, run.ErrExists) {
		return "", nil // another process finished the same fire
	}
	var inv *run.InvalidError
	if errors.As(err, &inv) {
		// The configuration no longer makes a run (its policy or a
		// connection went): nothing a retry changes.
		s.log.WarnContext(ctx, "schedule: the trigger's run is refused", "trigger", t.ID, "due", f.Due, "reason", inv.Error())
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("schedule: trigger %s at %s: %w", t.ID, f.Due, err)
	}
	s.log.InfoContext(ctx, "schedule fired", "trigger", t.ID, "due", f.Due, "run", v.ID, "repository", t.Repository, "ref", branch, "commit", sha)
	if s.cfg.RunCreated != nil {
		if h, err := s.st.GetHead(ctx, v.ID); err == nil {
			s.cfg.RunCreated(ctx, h)
		} else {
			s.log.ErrorContext(ctx, "run created: read head for the notification", "run", v.ID, "err", err)
		}
	}
	return v.ID, nil
}

// fired says whether a claimed fire needs nothing more: its run exists,
// or its claim is older than fireRetry (given up).
func (s *Schedules) fired(ctx context.Context, f store.Fire, now time.Time) (bool, error) {
	if _, err := s.st.GetHead(ctx, f.RunID); err == nil {
		return true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	prev, err := s.st.GetFire(ctx, f.TriggerID, f.Due)
	if err != nil {
		return false, err
	}
	claimed, err := time.Parse(store.TimeLayout, prev.ClaimedAt)
	if err != nil || now.Sub(claimed) > fireRetry {
		return true, nil
	}
	return false, nil
}
