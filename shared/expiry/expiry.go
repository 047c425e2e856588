// Package expiry is the AWS side of "expiry is deny" (docs/architecture.md,
// "Approvals"): StepFunctions starts one execution of the approval-expiry
// state machine per approval, and Handler is what the expire function
// runs.
//
// Guarantees:
//   - Scheduling twice is harmless. The execution is named after the
//     approval, Step Functions keeps one execution per name, and
//     ExecutionAlreadyExists counts as success.
//   - The execution never fires early. Its Wait state reads expires_at,
//     which is rounded up to the whole second, so the expire function
//     finds the approval overdue; if the function's clock still disagrees
//     it answers ErrNotDue and the state machine retries.
//   - A lost timer widens nothing. Expire is the same compare-and-swap as
//     lazy expiry and the sweep, so whichever runs first settles the
//     approval as expired and the others change nothing.
package expiry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/fluidbox/fluidbox/shared/approval"
)

// Input is an execution's input, as infra/approval-expiry.asl.json reads
// it: the Wait state waits until ExpiresAt, the Task passes ApprovalID on.
type Input struct {
	ApprovalID string `json:"approval_id"`
	// ExpiresAt is RFC 3339 UTC in whole seconds.
	ExpiresAt string `json:"expires_at"`
}

// StepFunctions is the approval.Scheduler of the Lambda functions.
type StepFunctions struct {
	client          *sfn.Client
	stateMachineARN string
}

var _ approval.Scheduler = (*StepFunctions)(nil)

// NewStepFunctions returns a scheduler that starts executions of the state
// machine stateMachineARN.
func NewStepFunctions(client *sfn.Client, stateMachineARN string) *StepFunctions {
	return &StepFunctions{client: client, stateMachineARN: stateMachineARN}
}

// Schedule starts the execution that expires approvalID at at. An execution
// of that name that already exists is success: it is the same timer.
func (s *StepFunctions) Schedule(ctx context.Context, approvalID string, at time.Time) error {
	in, err := json.Marshal(Input{ApprovalID: approvalID, ExpiresAt: WaitUntil(at)})
	if err != nil {
		return err
	}
	_, err = s.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(s.stateMachineARN),
		Name:            aws.String(approvalID),
		Input:           aws.String(string(in)),
	})
	var exists *types.ExecutionAlreadyExists
	if errors.As(err, &exists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("expiry: start execution %s: %w", approvalID, err)
	}
	return nil
}

// WaitUntil formats at for the state machine's Wait state: RFC 3339 UTC,
// rounded up to the next whole second so the timer never fires before the
// approval is overdue.
func WaitUntil(at time.Time) string {
	t := at.UTC()
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.Format(time.RFC3339)
}
