package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Member statuses. They are persisted: never rename one.
const (
	MemberActive   = "active"
	MemberInactive = "inactive"
)

// Member is an SSO user fluidbox has seen, at USER#<sub>/HEAD, and in the
// index gsi1 under "MEMBER" sorted by sub (how members are listed). The
// identity provider owns who a user is and which roles they hold; the
// member row is fluidbox's own switch to refuse a user whose tokens are
// still valid.
type Member struct {
	Sub    string   `dynamodbav:"sub" json:"sub"`
	Status string   `dynamodbav:"status" json:"status"`
	Roles  []string `dynamodbav:"roles,omitempty" json:"roles"`
	// Email is the verified email of the member's last token, how a Slack
	// user is matched to the member.
	Email         string `dynamodbav:"email,omitempty" json:"email,omitempty"`
	FirstSeen     string `dynamodbav:"first_seen" json:"first_seen"`
	LastSeen      string `dynamodbav:"last_seen" json:"last_seen"`
	DeactivatedBy string `dynamodbav:"deactivated_by,omitempty" json:"deactivated_by,omitempty"`
	DeactivatedAt string `dynamodbav:"deactivated_at,omitempty" json:"deactivated_at,omitempty"`
	ActivatedBy   string `dynamodbav:"activated_by,omitempty" json:"activated_by,omitempty"`
	ActivatedAt   string `dynamodbav:"activated_at,omitempty" json:"activated_at,omitempty"`
}

type memberItem struct {
	Member
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

func memberPK(sub string) string { return "USER#" + sub }

// ErrMemberExists: PutMember found the member already recorded.
var ErrMemberExists = fmt.Errorf("store: member exists: %w", ErrExists)

// ErrNoMember: the member has never been seen.
var ErrNoMember = fmt.Errorf("store: no such member: %w", ErrNotFound)

// PutMember records a member seen for the first time. It never replaces a
// row: if the member exists (another request recorded it first, or an
// admin deactivated it) it fails with ErrMemberExists.
//
// The put is a transaction of one item, not a PutItem: a member is first
// seen by whichever function a person's first request reaches (approvals,
// broker, control), and the approvals and broker roles may put items only
// inside TransactWriteItems (template.yaml), which keeps them from any
// blind overwrite; widening them to a plain PutItem on USER#* would be a
// second, unconditioned way in. Once per member, the transaction's double
// write cost is nothing.
func (s *Store) PutMember(ctx context.Context, m Member) error {
	av, err := item(memberPK(m.Sub), "HEAD", memberItem{Member: m, GSI1PK: "MEMBER", GSI1SK: m.Sub})
	if err != nil {
		return err
	}
	if err = s.transactOp(ctx, "put member "+m.Sub, []types.TransactWriteItem{putNew(s.table, av)}); errors.Is(err, ErrExists) {
		return fmt.Errorf("store: put member %s: %w", m.Sub, ErrMemberExists)
	}
	return err
}

// GetMember reads a member with a consistent read, so a deactivation holds
// from the next request on.
func (s *Store) GetMember(ctx context.Context, sub string) (Member, error) {
	var m Member
	err := s.get(ctx, memberPK(sub), "HEAD", &m)
	if errors.Is(err, ErrNotFound) {
		return Member{}, fmt.Errorf("store: member %s: %w", sub, ErrNoMember)
	}
	return m.normal(), err
}

// normal gives a decoded member a non-nil roles list (none is stored as
// no attribute).
func (m Member) normal() Member {
	if m.Roles == nil {
		m.Roles = []string{}
	}
	return m
}

// TouchMember records a member's current roles and when it was last seen.
// It never changes the status, and never creates a member.
func (s *Store) TouchMember(ctx context.Context, sub string, roles []string, email, at string) error {
	// No roles is no attribute: an empty list is stored as nothing; the
	// same for no email.
	set, remove := []string{"last_seen = :at"}, []string{}
	values := map[string]types.AttributeValue{":at": &types.AttributeValueMemberS{Value: at}}
	if len(roles) > 0 {
		rv, err := attributevalue.Marshal(roles)
		if err != nil {
			return fmt.Errorf("store: marshal roles: %w", err)
		}
		set, values[":roles"] = append(set, "#roles = :roles"), rv
	} else {
		remove = append(remove, "#roles")
	}
	if email != "" {
		set, values[":email"] = append(set, "email = :email"), &types.AttributeValueMemberS{Value: email}
	} else {
		remove = append(remove, "email")
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyOf(memberPK(sub), "HEAD"),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#roles": "roles"},
		ExpressionAttributeValues: values,
	})
	if err = translate("touch member "+sub, err); err != nil && errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: touch member %s: %w", sub, ErrNoMember)
	}
	return err
}

// SetMemberStatus activates or deactivates a member that has been seen,
// recording who did it and when; it fails with ErrNoMember otherwise.
func (s *Store) SetMemberStatus(ctx context.Context, sub, status, by, at string) (Member, error) {
	expr := "SET #status = :status, deactivated_by = :by, deactivated_at = :at"
	if status == MemberActive {
		expr = "SET #status = :status, activated_by = :by, activated_at = :at"
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyOf(memberPK(sub), "HEAD"),
		UpdateExpression:         aws.String(expr),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":status": &types.AttributeValueMemberS{Value: status},
			":by":     &types.AttributeValueMemberS{Value: by},
			":at":     &types.AttributeValueMemberS{Value: at},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err = translate("set member status "+sub, err); err != nil {
		if errors.Is(err, ErrConditionFailed) {
			return Member{}, fmt.Errorf("store: member %s: %w", sub, ErrNoMember)
		}
		return Member{}, err
	}
	var m Member
	if err := attributevalue.UnmarshalMap(out.Attributes, &m); err != nil {
		return Member{}, fmt.Errorf("store: decode member %s: %w", sub, err)
	}
	return m.normal(), nil
}

// ListMembers lists members by sub, at most limit. The index is eventually
// consistent: a member recorded a moment ago may be missing.
func (s *Store) ListMembers(ctx context.Context, limit int) ([]Member, error) {
	out, err := listIndex[Member](ctx, s, indexQuery{op: "list members", item: "member", pk: "MEMBER", limit: limit})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Member{}
	}
	for i := range out {
		out[i] = out[i].normal()
	}
	return out, nil
}
