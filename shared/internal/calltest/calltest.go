// Package calltest sets up what the tests of the packages that move tool
// calls (permission, approval, connection) need: a run on a real table, a
// clock the test moves, and faults injected into the SDK as DynamoDB would
// raise them.
package calltest

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Clock is a clock the test sets; it starts at a fixed time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at 2026-03-01 12:00 UTC.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Conflicts cancels, as DynamoDB cancels a transaction that overlapped
// another (reason TransactionConflict), each transaction that writes the
// attribute Attr, while Left is above zero (counting down) or always when
// it is negative. Seen counts the transactions that wrote Attr.
type Conflicts struct {
	Attr string
	Left atomic.Int64
	Seen atomic.Int64
}

// Option installs the faults on a DynamoDB client.
func (c *Conflicts) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("conflicts",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if tx, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok && c.writes(tx) {
					c.Seen.Add(1)
					if n := c.Left.Load(); n < 0 || (n > 0 && c.Left.CompareAndSwap(n, n-1)) {
						reasons := make([]types.CancellationReason, len(tx.TransactItems))
						for i := range reasons {
							reasons[i].Code = aws.String("None")
						}
						reasons[len(reasons)-1].Code = aws.String("TransactionConflict")
						return middleware.InitializeOutput{}, middleware.Metadata{}, &types.TransactionCanceledException{
							Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

func (c *Conflicts) writes(tx *dynamodb.TransactWriteItemsInput) bool {
	for _, it := range tx.TransactItems {
		if it.Update != nil {
			for _, name := range it.Update.ExpressionAttributeNames {
				if name == c.Attr {
					return true
				}
			}
		}
	}
	return false
}

// Env is a run on its own table with the services that move its calls,
// all on one Clock.
type Env struct {
	St        *store.Store
	Led       *ledger.Ledger
	Clock     *Clock
	Approvals *approval.Service
	Perm      *permission.Service
	RunID     string
	// ShadowPolicyID is the run's shadow policy (NewShadowEnv); "" for none.
	ShadowPolicyID string
	// DB is the DynamoDB server under St, for a test that changes items
	// behind the services' back.
	DB *devstack.DynamoDB
}

// NewEnv creates a run under the policy document policyText; opts go to
// the DynamoDB client (faults).
func NewEnv(t *testing.T, policyText string, opts ...func(*dynamodb.Options)) *Env {
	t.Helper()
	return NewShadowEnv(t, policyText, "", false, opts...)
}

// NewShadowEnv is NewEnv for a run that also carries shadowText as its
// shadow policy ("" for none), autonomous or not.
func NewShadowEnv(t *testing.T, policyText, shadowText string, autonomous bool, opts ...func(*dynamodb.Options)) *Env {
	t.Helper()
	ctx := context.Background()
	st, db := testenv.StoreOn(t, opts...)
	clock := NewClock()
	led := ledger.New(st, clock.Now)
	put := func(text string) string { return PutPolicy(t, st, text, clock.Now()) }
	polID, shadowID := put(policyText), ""
	if shadowText != "" {
		shadowID = put(shadowText)
	}
	limit := 10.0
	req := run.CreateRequest{PolicyID: polID, ShadowPolicyID: shadowID, Autonomous: autonomous, Capabilities: []string{"claude-code"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	v, err := run.NewService(led, clock.Now).Create(ctx, auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, req)
	if err != nil {
		t.Fatal(err)
	}
	approvals := approval.NewService(led, clock.Now)
	return &Env{St: st, Led: led, Clock: clock, Approvals: approvals, RunID: v.ID, ShadowPolicyID: shadowID, DB: db,
		Perm: permission.NewService(led, approvals, approval.Lazy{}, nil, clock.Now)}
}

// PutPolicy stores the policy document text as version 1 of a new policy,
// as the control API would, and returns its id.
func PutPolicy(t testing.TB, st *store.Store, text string, now time.Time) string {
	t.Helper()
	p, _, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(p.Document())
	if err != nil {
		t.Fatal(err)
	}
	id := ids.New("pol_")
	if err := st.PutPolicyVersion(context.Background(), store.PolicyVersion{PolicyID: id, Version: 1, Name: "p", Digest: p.Digest(), Document: string(doc), CreatedAt: store.FormatTime(now)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// Bash asks the permission service about a Bash command.
func (e *Env) Bash(t *testing.T, callID, command string, wait time.Duration) (permission.Answer, error) {
	t.Helper()
	input, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return e.Perm.Decide(context.Background(), e.RunID, permission.Request{ToolCallID: callID, ToolName: "Bash", Input: input}, wait)
}

// Events lists the types of the run's events.
func (e *Env) Events(t *testing.T) []string {
	t.Helper()
	evs, _, err := e.Led.Read(context.Background(), e.RunID, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}
