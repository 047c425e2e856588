// Package sweep is the scheduled backstop: what no timer or read settled,
// the sweep settles (Sweeper).
package sweep

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/elicitation"
)

// Sweeper is the scheduled backstop, the sweep function's (every five
// minutes) and `fluidbox dev`'s (every minute): it settles what no timer
// or read settled.
type Sweeper struct {
	Approvals    *approval.Service
	Inputs       *elicitation.Service
	Reservations *admission.Service
	// ReservationsAfter is how long a budget reservation may stay open
	// before the sweep settles it as spent in full.
	ReservationsAfter time.Duration
	Now               func() time.Time
	Log               *slog.Logger
}

// Swept is what one sweep settled.
type Swept struct {
	// ExpiredApprovals were overdue; DeniedApprovals belonged to a run
	// that allows no call any more (it ended, or spent its budget);
	// PendingApprovals are still waiting for a person after the sweep.
	ExpiredApprovals int `json:"expired"`
	DeniedApprovals  int `json:"denied_for_run"`
	PendingApprovals int `json:"pending_approvals"`
	// SettledReservations were open past ReservationsAfter.
	SettledReservations int `json:"settled_reservations"`
	// ExpiredInputRequests were overdue; DeclinedInputRequests belonged
	// to a run that allows no call any more.
	ExpiredInputRequests  int `json:"expired_input_requests"`
	DeclinedInputRequests int `json:"declined_input_requests"`
}

// Sweep expires every overdue pending approval and input request, denies
// or declines those of runs that allow no call any more, and settles as
// spent every reservation left open too long. Each part runs whatever
// another's error; the errors are joined.
func (s Sweeper) Sweep(ctx context.Context) (Swept, error) {
	approvals, aerr := s.Approvals.Sweep(ctx)
	reservations, rerr := s.Reservations.SweepReservations(ctx, s.Now().Add(-s.ReservationsAfter))
	inputs, ierr := s.Inputs.Sweep(ctx)
	out := Swept{
		ExpiredApprovals: approvals.Expired, DeniedApprovals: approvals.Refused, PendingApprovals: approvals.Left,
		SettledReservations:  reservations,
		ExpiredInputRequests: inputs.Expired, DeclinedInputRequests: inputs.Refused,
	}
	level := slog.LevelInfo
	if out == (Swept{PendingApprovals: out.PendingApprovals}) {
		level = slog.LevelDebug // a quiet round: nothing to say every minute in dev
	}
	s.Log.Log(ctx, level, "sweep", "expired_approvals", out.ExpiredApprovals, "denied_approvals", out.DeniedApprovals, "pending_approvals", out.PendingApprovals,
		"settled_reservations", out.SettledReservations, "expired_input_requests", out.ExpiredInputRequests, "declined_input_requests", out.DeclinedInputRequests)
	return out, errors.Join(aerr, rerr, ierr)
}
