// Package vocab is fluidbox's vocabulary of states: one type per concept,
// each owning its spelling on the wire and in the table, and refusing any
// other spelling when it is decoded (JSON and DynamoDB alike), so an
// unknown value never reaches a comparison that could read it as allowed.
//
//   - Decision: the recorded answer to a call (allow, deny, pending): the
//     call record's decision and the wire's.
//   - ApprovalStatus: where an approval stands (pending, then one of
//     approved_once, approved_session, denied, expired).
//   - Choice: what a person may post on an approval (approved_once,
//     approved_session, denied, or approved for the rule's default scope).
//   - RunStatus: where a run stands (running, awaiting_approval, ended).
//
// The spellings are persisted and on the wire: never rename one. This
// package imports nothing of fluidbox, so every package can use it.
package vocab

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Decision is a call's recorded answer.
type Decision string

// Decisions.
const (
	Allow   Decision = "allow"
	Deny    Decision = "deny"
	Pending Decision = "pending"
)

// ApprovalStatus is where an approval stands.
type ApprovalStatus string

// Approval statuses. Every one but ApprovalPending is a settlement: an
// approval is settled once and never moves again.
const (
	ApprovalPending ApprovalStatus = "pending"
	ApprovedOnce    ApprovalStatus = "approved_once"
	ApprovedSession ApprovalStatus = "approved_session"
	ApprovalDenied  ApprovalStatus = "denied"
	ApprovalExpired ApprovalStatus = "expired"
)

// Choice is what a person may post to settle an approval.
type Choice string

// Choices.
const (
	ChoiceApprovedOnce    Choice = "approved_once"
	ChoiceApprovedSession Choice = "approved_session"
	ChoiceDenied          Choice = "denied"
	// ChoiceApproved approves with the rule's default scope.
	ChoiceApproved Choice = "approved"
)

// RunStatus is where a run stands.
type RunStatus string

// Run statuses.
const (
	Running          RunStatus = "running"
	AwaitingApproval RunStatus = "awaiting_approval"
	Ended            RunStatus = "ended"
)

// Each type's values, in the order the docs list them.
var (
	decisions  = []Decision{Allow, Deny, Pending}
	statuses   = []ApprovalStatus{ApprovalPending, ApprovedOnce, ApprovedSession, ApprovalDenied, ApprovalExpired}
	choices    = []Choice{ChoiceApprovedOnce, ChoiceApprovedSession, ChoiceDenied, ChoiceApproved}
	runs       = []RunStatus{Running, AwaitingApproval, Ended}
	errUnknown = "vocab: %q is not a %s (one of %v)"
)

// Decisions, ApprovalStatuses, Choices and RunStatuses list each type's
// values.
func Decisions() []Decision              { return slices.Clone(decisions) }
func ApprovalStatuses() []ApprovalStatus { return slices.Clone(statuses) }
func Choices() []Choice                  { return slices.Clone(choices) }
func RunStatuses() []RunStatus           { return slices.Clone(runs) }

// Valid reports whether d is a decision.
func (d Decision) Valid() bool { return slices.Contains(decisions, d) }

// Valid reports whether s is an approval status.
func (s ApprovalStatus) Valid() bool { return slices.Contains(statuses, s) }

// Valid reports whether c is a choice.
func (c Choice) Valid() bool { return slices.Contains(choices, c) }

// Valid reports whether s is a run status.
func (s RunStatus) Valid() bool { return slices.Contains(runs, s) }

// Settled reports whether s is a settlement (anything but pending).
func (s ApprovalStatus) Settled() bool { return s.Valid() && s != ApprovalPending }

// Approved reports whether s lets the call run.
func (s ApprovalStatus) Approved() bool { return s == ApprovedOnce || s == ApprovedSession }

// Answer is the decision a settled approval leaves on its call: allow when
// approved, deny otherwise (denied, expired); pending while it is pending.
func (s ApprovalStatus) Answer() Decision {
	switch {
	case s.Approved():
		return Allow
	case s == ApprovalPending:
		return Pending
	}
	return Deny
}

// Settles reports whether an approval at s is settled as c asks: the same
// status, or for ChoiceApproved either approval.
func (c Choice) Settles(s ApprovalStatus) bool {
	if c == ChoiceApproved {
		return s.Approved()
	}
	return c.Valid() && string(c) == string(s)
}

// parse is s as a value of T, or an error naming what T is.
func parse[T ~string](s string, values []T, what string) (T, error) {
	if v := T(s); slices.Contains(values, v) {
		return v, nil
	}
	return "", fmt.Errorf(errUnknown, s, what, values)
}

// ParseDecision, ParseApprovalStatus, ParseChoice and ParseRunStatus read a
// spelling, refusing any other.
func ParseDecision(s string) (Decision, error) {
	return parse(s, decisions, "decision")
}
func ParseApprovalStatus(s string) (ApprovalStatus, error) {
	return parse(s, statuses, "approval status")
}
func ParseChoice(s string) (Choice, error)       { return parse(s, choices, "choice") }
func ParseRunStatus(s string) (RunStatus, error) { return parse(s, runs, "run status") }

// decodeJSON reads a JSON string naming a value of T; null, any other
// type and any other spelling are refused.
func decodeJSON[T ~string](b []byte, into *T, values []T, what string) error {
	var s string
	if len(b) == 0 || b[0] != '"' {
		return fmt.Errorf("vocab: a %s is a JSON string, not %.20s", what, b)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := parse(s, values, what)
	if err != nil {
		return err
	}
	*into = v
	return nil
}

// encodeJSON writes v, refusing a value that is not one of T's.
func encodeJSON[T ~string](v T, values []T, what string) ([]byte, error) {
	if _, err := parse(string(v), values, what); err != nil {
		return nil, err
	}
	return json.Marshal(string(v))
}

// decodeAV reads a DynamoDB string attribute naming a value of T; any other
// attribute type (NULL included) and any other spelling are refused.
func decodeAV[T ~string](av types.AttributeValue, into *T, values []T, what string) error {
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return fmt.Errorf("vocab: a stored %s is a string attribute, not %T", what, av)
	}
	v, err := parse(s.Value, values, what)
	if err != nil {
		return err
	}
	*into = v
	return nil
}

// encodeAV writes v as a string attribute, refusing a value that is not
// one of T's.
func encodeAV[T ~string](v T, values []T, what string) (types.AttributeValue, error) {
	if _, err := parse(string(v), values, what); err != nil {
		return nil, err
	}
	return &types.AttributeValueMemberS{Value: string(v)}, nil
}

func (d Decision) MarshalJSON() ([]byte, error)   { return encodeJSON(d, decisions, "decision") }
func (d *Decision) UnmarshalJSON(b []byte) error  { return decodeJSON(b, d, decisions, "decision") }
func (c Choice) MarshalJSON() ([]byte, error)     { return encodeJSON(c, choices, "choice") }
func (c *Choice) UnmarshalJSON(b []byte) error    { return decodeJSON(b, c, choices, "choice") }
func (s RunStatus) MarshalJSON() ([]byte, error)  { return encodeJSON(s, runs, "run status") }
func (s *RunStatus) UnmarshalJSON(b []byte) error { return decodeJSON(b, s, runs, "run status") }
func (s ApprovalStatus) MarshalJSON() ([]byte, error) {
	return encodeJSON(s, statuses, "approval status")
}
func (s *ApprovalStatus) UnmarshalJSON(b []byte) error {
	return decodeJSON(b, s, statuses, "approval status")
}

func (d Decision) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return encodeAV(d, decisions, "decision")
}
func (d *Decision) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	return decodeAV(av, d, decisions, "decision")
}
func (s ApprovalStatus) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return encodeAV(s, statuses, "approval status")
}
func (s *ApprovalStatus) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	return decodeAV(av, s, statuses, "approval status")
}
func (s RunStatus) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return encodeAV(s, runs, "run status")
}
func (s *RunStatus) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	return decodeAV(av, s, runs, "run status")
}
