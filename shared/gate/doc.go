// Package gate is fluidbox's permission gate: the one place that answers
// "may this tool call happen?".
//
// Decide is a pure function of a run's frozen state, the mutable head fields
// a decision depends on, the run's session grants, and the live state of
// the connections the call needs, all read by the caller and passed in as
// values. It does no I/O, calls back into nothing and reads no clock, so the
// same inputs always give the same Decision, and the caller can record,
// replay and test every answer.
//
// What it guarantees:
//
//   - The stages run in one fixed order, given by a single slice literal
//     (stages, in gate.go), numbered as docs/architecture.md numbers them:
//     0 session, 1 budget, 2 frozen tool set, 3 frozen schema, 4 trust
//     tier, 5 policy, 6 approval. The first stage that decides wins; no
//     later stage is consulted. Each stage's file opens with the argument
//     for why it sits where it sits.
//   - Fail closed. A nil run, policy, tool or schema, an unknown trust tier,
//     class, connection status or verdict, a missing binding or connection
//     record, and a panic in a stage all end in deny, never in allow. The
//     recover covers the gate's own stages only (nothing of the caller's
//     runs inside), and the Decision says it happened (Panicked) so the
//     caller logs it.
//   - Nothing that concerns approval can pass stages 0-5: session grants and
//     the autonomy flag are read only by the approval stage, after the
//     policy said require_approval. A read_only run never gets allow for a
//     tool that is not of class read, nor for any brokered tool.
//   - A run's shadow policy (Run.Shadow) is evaluated only where the policy
//     stage runs, on the same call, and only reported (Decision.Shadow):
//     every other field of the Decision is what it would be without it,
//     and a shadow that fails is a shadow error, never a deny.
//   - A denial is a value (Decision with a Source and a human Reason), not an
//     error. Reasons are written for the model and the operator: they name
//     the tool, the rule or the connection, may quote the schema validator's
//     reason, and never contain credentials.
//
// Sources and outcomes are persisted and on the wire; they are never renamed.
// SourceApproval and SourceApprovalExpired are defined here so that every
// source lives in one place, but Decide never returns them: they are what the
// caller records when a pending approval is denied by a human or expires.
package gate
