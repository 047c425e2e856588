package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Trigger is a trigger configuration: which runs a repository's events
// create. It is stored at TRG#<id>/HEAD, listed through gsi1 under
// "TRIGGER", and its repository is claimed at TRGREPO#<owner/name in lower
// case>/HEAD, so a repository has at most one configuration (GitHub's
// repository names are case-insensitive).
type Trigger struct {
	ID            string `dynamodbav:"id"`
	Repository    string `dynamodbav:"repository"`
	PolicyID      string `dynamodbav:"policy_id"`
	PolicyVersion int    `dynamodbav:"policy_version"`
	// ShadowPolicyID and ShadowPolicyVersion (0: the latest at the event)
	// name the runs' shadow policy; "" for none.
	ShadowPolicyID      string   `dynamodbav:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int      `dynamodbav:"shadow_policy_version,omitempty"`
	Capabilities        []string `dynamodbav:"capabilities"`
	Connections         []string `dynamodbav:"connections"`
	Autonomous          bool     `dynamodbav:"autonomous"`
	// BudgetLimit is in integer micro-USD.
	BudgetLimit int64    `dynamodbav:"budget_limit"`
	TrustTier   string   `dynamodbav:"trust_tier"`
	Events      []string `dynamodbav:"events"`
	// Workspace is the runs' declared workspace ("" for none).
	Workspace string `dynamodbav:"workspace,omitempty"`
	// Verify is the runs' setting for the model proxy's check ("" halts).
	Verify string `dynamodbav:"verify,omitempty"`
	// OwnSecret: deliveries for this repository must be signed with the
	// trigger's own webhook secret (derived from its id, never stored), and
	// the server's secret does not sign for it.
	OwnSecret bool `dynamodbav:"own_secret,omitempty"`
	// SlackChannel is where the approvals of its runs are posted ("" for
	// FLUIDBOX_SLACK_CHANNEL). It routes messages and grants nothing, so
	// it is read when a message is posted, not frozen with the run.
	SlackChannel string `dynamodbav:"slack_channel,omitempty"`
	// Prompt is what a launched run's agent is asked (claude -p); Report
	// how its result goes back (check_run, comment, none); TimeoutSeconds
	// how long the agent may run. A trigger without a prompt is not
	// launched. They start the runner, not the run, so they are read at
	// launch, not frozen.
	Prompt         string `dynamodbav:"prompt,omitempty"`
	Report         string `dynamodbav:"report,omitempty"`
	TimeoutSeconds int    `dynamodbav:"timeout_seconds,omitempty"`
	// Schedule is an EventBridge cron(...) or rate(...) expression on which
	// the trigger also starts runs ("" for none), on the head of branch Ref
	// ("" for the repository's default branch) at each due time.
	// ScheduleSince is when the expression was set: nothing due at or
	// before it fires, and a rate counts from its minute.
	Schedule      string `dynamodbav:"schedule,omitempty"`
	Ref           string `dynamodbav:"ref,omitempty"`
	ScheduleSince string `dynamodbav:"schedule_since,omitempty"`
	// RunnerKeyHash is the hash of the trigger's runner key, which may have
	// the tokens of this trigger's runs issued; "" for none.
	RunnerKeyHash string `dynamodbav:"runner_key_hash,omitempty"`
	// Revision counts updates (0: never updated); UpdatedAt is the last.
	Revision  int    `dynamodbav:"revision,omitempty"`
	UpdatedAt string `dynamodbav:"updated_at,omitempty"`
	CreatedAt string `dynamodbav:"created_at"`
	CreatedBy string `dynamodbav:"created_by"`
}

// ErrRepositoryTaken: the repository already has a trigger configuration.
var ErrRepositoryTaken = fmt.Errorf("store: repository has a trigger: %w", ErrExists)

type triggerItem struct {
	Trigger
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

func triggerPK(id string) string { return "TRG#" + id }

func triggerRepoPK(repo string) string { return "TRGREPO#" + strings.ToLower(repo) }

// PutTrigger stores a new trigger configuration and claims its repository,
// in one transaction: either both exist or neither.
func (s *Store) PutTrigger(ctx context.Context, t Trigger) error {
	err := s.putClaimed(ctx, "transact", triggerPK(t.ID), triggerItem{Trigger: t, GSI1PK: triggerIndex, GSI1SK: t.CreatedAt + "#" + t.ID}, triggerRepoPK(t.Repository), t.ID)
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("store: trigger for %s: %w", t.Repository, ErrRepositoryTaken)
	}
	if err != nil {
		return fmt.Errorf("store: put trigger %s: %w", t.ID, err)
	}
	return nil
}

// GetTrigger reads a trigger configuration by id.
func (s *Store) GetTrigger(ctx context.Context, id string) (Trigger, error) {
	var t Trigger
	err := s.get(ctx, triggerPK(id), "HEAD", &t)
	return t, err
}

// TriggerForRepository reads the configuration of a repository ("owner/name",
// any case). ErrNotFound: the repository has none.
func (s *Store) TriggerForRepository(ctx context.Context, repo string) (Trigger, error) {
	var n nameItem
	if err := s.get(ctx, triggerRepoPK(repo), "HEAD", &n); err != nil {
		return Trigger{}, err
	}
	return s.GetTrigger(ctx, n.ID)
}

// Delivery is the claim of one webhook delivery, at DELIVERY#<id>/HEAD. It
// is written before the run it creates, and names that run's id, which is
// derived from the signed body: a retry after a crash between the claim and
// the run finds the claim, creates the same run, and a duplicate or a
// replay under another delivery id finds the run.
type Delivery struct {
	ID         string `dynamodbav:"id"`
	SessionID  string `dynamodbav:"session_id"`
	TriggerID  string `dynamodbav:"trigger_id"`
	Repository string `dynamodbav:"repository"`
	Number     int    `dynamodbav:"number"`
	HeadSHA    string `dynamodbav:"head_sha"`
	// BodyDigest is the digest of the signed body, so an audit can tell a
	// redelivery (same body) from a reused delivery id, and a replay (same
	// body, new id) from a new event.
	BodyDigest string `dynamodbav:"body_digest"`
	ReceivedAt string `dynamodbav:"received_at"`
}

// ErrDeliveryClaimed: the delivery was claimed before.
var ErrDeliveryClaimed = fmt.Errorf("store: delivery claimed: %w", ErrExists)

func deliveryPK(id string) string { return "DELIVERY#" + id }

// ClaimDelivery records a delivery unless it was recorded before; then it
// fails with ErrDeliveryClaimed and changes nothing.
func (s *Store) ClaimDelivery(ctx context.Context, d Delivery) error {
	av, err := item(deliveryPK(d.ID), "HEAD", d)
	if err != nil {
		return err
	}
	err = s.putItemNew(ctx, "claim delivery "+d.ID, av)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: delivery %s: %w", d.ID, ErrDeliveryClaimed)
	}
	return err
}

// GetDelivery reads a delivery's claim.
func (s *Store) GetDelivery(ctx context.Context, id string) (Delivery, error) {
	var d Delivery
	err := s.get(ctx, deliveryPK(id), "HEAD", &d)
	return d, err
}

// GitHubTrigger records, on a run's head, the GitHub delivery that created
// the run: ids and names from the verified payload, never the payload.
type GitHubTrigger struct {
	TriggerID      string `dynamodbav:"trigger_id" json:"trigger_id"`
	DeliveryID     string `dynamodbav:"delivery_id" json:"delivery_id"`
	Event          string `dynamodbav:"event" json:"event"`
	Action         string `dynamodbav:"action" json:"action"`
	Repository     string `dynamodbav:"repository" json:"repository"`
	HeadRepository string `dynamodbav:"head_repository" json:"head_repository"`
	PullRequest    int    `dynamodbav:"pull_request" json:"pull_request"`
	HeadSHA        string `dynamodbav:"head_sha" json:"head_sha"`
	Fork           bool   `dynamodbav:"fork" json:"fork"`
	// Author is the pull request author's GitHub user id ("" when the
	// delivery had none): with Repository, the source whose runs' pending
	// approvals are capped together.
	Author string `dynamodbav:"author,omitempty" json:"author,omitempty"`
	// Ref and ScheduledFor are set on a run a schedule started (Event
	// "schedule", no pull request): the branch whose head it froze as
	// HeadSHA, and the due time it was started for.
	Ref          string `dynamodbav:"ref,omitempty" json:"ref,omitempty"`
	ScheduledFor string `dynamodbav:"scheduled_for,omitempty" json:"scheduled_for,omitempty"`
}

// ErrTriggerChanged: the configuration was updated or deleted since the
// caller read it.
var ErrTriggerChanged = fmt.Errorf("store: trigger changed: %w", ErrConditionFailed)

// UpdateTrigger replaces a configuration whose revision was t.Revision-1
// when the caller read it: a compare-and-swap, so of two concurrent updates
// one wins and the other gets ErrTriggerChanged. The id, repository,
// creation and listing position never change.
func (s *Store) UpdateTrigger(ctx context.Context, t Trigger) error {
	av, err := item(triggerPK(t.ID), "HEAD", triggerItem{Trigger: t, GSI1PK: triggerIndex, GSI1SK: t.CreatedAt + "#" + t.ID})
	if err != nil {
		return err
	}
	cond := "attribute_exists(pk) AND repository = :repo AND created_at = :created AND "
	vals := map[string]types.AttributeValue{
		":repo":    &types.AttributeValueMemberS{Value: t.Repository},
		":created": &types.AttributeValueMemberS{Value: t.CreatedAt},
	}
	if t.Revision <= 1 {
		cond += "attribute_not_exists(revision)"
	} else {
		cond += "revision = :prev"
		vals[":prev"] = num(int64(t.Revision - 1))
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      av,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	err = translate("update trigger "+t.ID, err)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: update trigger %s: %w", t.ID, ErrTriggerChanged)
	}
	return err
}

// DeleteTrigger deletes a configuration and frees its repository, in one
// transaction. Runs it created keep everything they froze. ErrNotFound: no
// such configuration.
func (s *Store) DeleteTrigger(ctx context.Context, id string) (Trigger, error) {
	t, err := s.GetTrigger(ctx, id)
	if err != nil {
		return Trigger{}, err
	}
	err = s.transactWrite(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName:           aws.String(s.table),
			Key:                 keyOf(triggerPK(id), "HEAD"),
			ConditionExpression: aws.String("attribute_exists(pk)"),
		}},
		{Delete: &types.Delete{
			TableName:                 aws.String(s.table),
			Key:                       keyOf(triggerRepoPK(t.Repository), "HEAD"),
			ConditionExpression:       aws.String("id = :id"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: id}},
		}},
	})
	if conditionFailed(err) {
		return Trigger{}, fmt.Errorf("store: delete trigger %s: %w", id, ErrNotFound)
	}
	if err := translate("delete trigger "+id, err); err != nil {
		return Trigger{}, err
	}
	return t, nil
}
