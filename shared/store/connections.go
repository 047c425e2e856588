package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Connection statuses. They are persisted: never rename one.
const (
	ConnectionActive  = "active"
	ConnectionRevoked = "revoked"
	// ConnectionAuthorizationRequired: an OAuth connection with no usable
	// grant (never authorized, or its refresh was refused for good).
	ConnectionAuthorizationRequired = "authorization_required"
)

// Connection kinds. They are persisted: never rename one.
const (
	ConnectionPersonal = "personal"
	ConnectionShared   = "shared"
)

// Connection is an upstream MCP server, at CON#<id>/HEAD, listed in gsi1
// under "CON" (sorted by creation). Its credential is kept only sealed
// (seal.SealCredential under the connection id and Generation); nothing in
// this package can open it. A connection's name is unique: CONNAME#<name>
// points at its id.
type Connection struct {
	ID     string `dynamodbav:"id"`
	Name   string `dynamodbav:"name"`
	URL    string `dynamodbav:"url"`
	Kind   string `dynamodbav:"kind"`
	Owner  string `dynamodbav:"owner"`
	Status string `dynamodbav:"status"`
	// Generation is the authorization generation: 1 at creation, +1 on
	// every credential replacement. The sealed credential opens only
	// under (ID, Generation).
	Generation     int    `dynamodbav:"authorization_generation"`
	Sealed         []byte `dynamodbav:"sealed_credential,omitempty"`
	CredentialType string `dynamodbav:"credential_type"`
	// ToolClasses is the operator's class for each upstream tool name.
	ToolClasses map[string]string `dynamodbav:"tool_classes,omitempty"`
	// PhotoDigest names the latest photograph (CON#<id>/TOOLS#<digest>);
	// empty until the first refresh.
	PhotoDigest string `dynamodbav:"photo_digest,omitempty"`
	RefreshedAt string `dynamodbav:"refreshed_at,omitempty"`
	CreatedAt   string `dynamodbav:"created_at"`
	UpdatedAt   string `dynamodbav:"updated_at"`
	RevokedBy   string `dynamodbav:"revoked_by,omitempty"`
	RevokedAt   string `dynamodbav:"revoked_at,omitempty"`
	// OAuth is set for credential type oauth.
	OAuth
}

type connectionItem struct {
	Connection
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

func connectionPK(id string) string { return "CON#" + id }

// ErrConnectionChanged: the connection is not as the caller saw it (its
// generation moved, or it is no longer active).
var ErrConnectionChanged = fmt.Errorf("store: connection changed: %w", ErrConditionFailed)

// PutConnection stores a new connection and claims its name; it fails with
// ErrNameTaken if the name is in use.
func (s *Store) PutConnection(ctx context.Context, c Connection) error {
	err := s.putClaimed(ctx, "put connection "+c.ID, connectionPK(c.ID), connectionItem{Connection: c, GSI1PK: "CON", GSI1SK: c.CreatedAt + "#" + c.ID}, "CONNAME#"+c.Name, c.ID)
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("store: connection %q: %w", c.Name, ErrNameTaken)
	}
	return err
}

// GetConnection reads a connection with a consistent read: the broker
// re-verifies a binding against it before touching the secret.
func (s *Store) GetConnection(ctx context.Context, id string) (Connection, error) {
	var c Connection
	err := s.get(ctx, connectionPK(id), "HEAD", &c)
	return c, err
}

// ConnectionIDByName resolves a connection's name.
func (s *Store) ConnectionIDByName(ctx context.Context, name string) (string, error) {
	var n nameItem
	err := s.get(ctx, "CONNAME#"+name, "HEAD", &n)
	return n.ID, err
}

// ConnectionPage is one page of connections, newest first.
type ConnectionPage struct {
	Connections []Connection
	Next        string
}

// ListConnectionPage returns one page of the connections keep accepts
// (who may see them), newest first, like the other listings: a page may
// hold fewer than q.Limit and still have a Next.
func (s *Store) ListConnectionPage(ctx context.Context, q ListQuery, keep func(Connection) bool) (ConnectionPage, error) {
	var page ConnectionPage
	at := func(p string) (string, string) { return connectionPK(idOf(p)), "HEAD" }
	next, err := s.listPage(ctx, "list connections", "CON", q, at, "", nil, nil, func(avs []map[string]types.AttributeValue) (int, error) {
		n := 0
		for _, av := range avs {
			var c Connection
			if err := attributevalue.UnmarshalMap(av, &c); err != nil {
				return 0, fmt.Errorf("store: decode connection: %w", err)
			}
			if keep(c) {
				page.Connections = append(page.Connections, c)
				n++
			}
		}
		return n, nil
	})
	page.Next = next
	return page, err
}

// ReplaceConnectionCredential stores a credential sealed for generation
// oldGen+1 and moves the generation there. It is a compare-and-swap on the
// generation the caller sealed against: if another replacement landed first,
// or the connection was revoked, it fails with ErrConnectionChanged and
// nothing changes.
func (s *Store) ReplaceConnectionCredential(ctx context.Context, id string, oldGen int, sealed []byte, credType, at string) (Connection, error) {
	av, err := s.changeConnection(ctx, "replace credential of", id, &dynamodb.UpdateItemInput{
		UpdateExpression:         aws.String("SET authorization_generation = :new, sealed_credential = :sealed, credential_type = :ct, updated_at = :at"),
		ConditionExpression:      aws.String("authorization_generation = :old AND #status = :active"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":new":    num(int64(oldGen + 1)),
			":old":    num(int64(oldGen)),
			":sealed": &types.AttributeValueMemberB{Value: sealed},
			":ct":     &types.AttributeValueMemberS{Value: credType},
			":at":     &types.AttributeValueMemberS{Value: at},
			":active": &types.AttributeValueMemberS{Value: ConnectionActive},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return Connection{}, err
	}
	return decodeConnection(id, av)
}

// changeConnection applies in, a conditional update, to connection id's
// head item and returns what in's ReturnValues asks for; a failed condition
// is ErrConnectionChanged. what names the change in errors ("replace
// credential of").
func (s *Store) changeConnection(ctx context.Context, what, id string, in *dynamodb.UpdateItemInput) (map[string]types.AttributeValue, error) {
	in.TableName = aws.String(s.table)
	in.Key = keyOf(connectionPK(id), "HEAD")
	out, err := s.db.UpdateItem(ctx, in)
	if err = translate(what+" "+id, err); err != nil {
		if errors.Is(err, ErrConditionFailed) {
			return nil, fmt.Errorf("store: %s %s: %w", what, id, ErrConnectionChanged)
		}
		return nil, err
	}
	return out.Attributes, nil
}

// RevokeConnection marks a connection revoked (from active or
// authorization_required) and deletes its sealed credential and OAuth
// client secret: a revoked connection has no secret left to open. Revoking a
// revoked connection changes nothing; a missing one is ErrNotFound.
func (s *Store) RevokeConnection(ctx context.Context, id, by, at string) (Connection, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyOf(connectionPK(id), "HEAD"),
		UpdateExpression:         aws.String("SET #status = :revoked, revoked_by = :by, revoked_at = :at, updated_at = :at REMOVE sealed_credential, oauth_client_secret"),
		ConditionExpression:      aws.String("attribute_exists(pk) AND #status <> :revoked"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":revoked": &types.AttributeValueMemberS{Value: ConnectionRevoked},
			":by":      &types.AttributeValueMemberS{Value: by},
			":at":      &types.AttributeValueMemberS{Value: at},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err = translate("revoke connection "+id, err); err != nil {
		if !errors.Is(err, ErrConditionFailed) {
			return Connection{}, err
		}
		// Missing, or revoked already: read which.
		return s.GetConnection(ctx, id)
	}
	return decodeConnection(id, out.Attributes)
}

func decodeConnection(id string, av map[string]types.AttributeValue) (Connection, error) {
	var c Connection
	if err := attributevalue.UnmarshalMap(av, &c); err != nil {
		return Connection{}, fmt.Errorf("store: decode connection %s: %w", id, err)
	}
	return c, nil
}

// PhotoTool is one upstream tool as photographed, with what fluidbox made of
// it: the class (operator's, possibly tightened by annotations), the schema
// guard's verdict and the digests a run freezes.
type PhotoTool struct {
	Name        string `dynamodbav:"name"`
	Description string `dynamodbav:"description"`
	InputSchema string `dynamodbav:"input_schema"`
	// OutputSchema is the tool's output schema as JSON ("" when none).
	OutputSchema string `dynamodbav:"output_schema,omitempty"`
	// Annotations is the upstream's hints as JSON ("" when none).
	Annotations  string `dynamodbav:"annotations,omitempty"`
	Class        string `dynamodbav:"class"`
	SchemaDigest string `dynamodbav:"schema_digest,omitempty"`
	ToolDigest   string `dynamodbav:"tool_digest"`
	Callable     bool   `dynamodbav:"callable"`
	Reason       string `dynamodbav:"reason,omitempty"`
}

// Photo is a photograph of a connection's tools: CON#<id>/TOOLS#<digest>,
// one item per tool under it (TOOLS#<digest>#<index>, so a tool's name,
// which the upstream chose, is never part of a key), and a head item with
// the count. Photographs are content-addressed by the upstream's tool-set
// digest and never edited.
type Photo struct {
	ConnectionID string      `dynamodbav:"connection_id"`
	Digest       string      `dynamodbav:"digest"`
	TakenAt      string      `dynamodbav:"taken_at"`
	Count        int         `dynamodbav:"count"`
	Tools        []PhotoTool `dynamodbav:"-"`
}

func photoSK(digest string) string { return "TOOLS#" + digest }

// PutPhoto stores a photograph and then makes it the connection's latest,
// in that order, so a connection never names a photograph that is not
// complete. Moving the latest is conditioned on the connection being
// active (ErrConnectionChanged otherwise).
func (s *Store) PutPhoto(ctx context.Context, p Photo) error {
	pk := connectionPK(p.ConnectionID)
	p.Count = len(p.Tools)
	var puts []types.TransactWriteItem
	for i, t := range p.Tools {
		av, err := item(pk, fmt.Sprintf("%s#%05d", photoSK(p.Digest), i), t)
		if err != nil {
			return err
		}
		puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: av}})
	}
	head, err := item(pk, photoSK(p.Digest), p)
	if err != nil {
		return err
	}
	puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: head}})
	// The same digest always has the same content, so rewriting a photograph
	// that exists (a refresh that found no change) is harmless.
	for _, c := range chunk(puts, maxTxItems) {
		if err := s.transact(ctx, c); err != nil {
			return fmt.Errorf("store: photograph of %s: %w", p.ConnectionID, err)
		}
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyOf(pk, "HEAD"),
		UpdateExpression:         aws.String("SET photo_digest = :d, refreshed_at = :at"),
		ConditionExpression:      aws.String("#status = :active"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d":      &types.AttributeValueMemberS{Value: p.Digest},
			":at":     &types.AttributeValueMemberS{Value: p.TakenAt},
			":active": &types.AttributeValueMemberS{Value: ConnectionActive},
		},
	})
	if err = translate("photograph of "+p.ConnectionID, err); errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: photograph of %s: %w", p.ConnectionID, ErrConnectionChanged)
	}
	return err
}

// GetPhoto reads a photograph with its tools, in the order they were
// stored (by name).
func (s *Store) GetPhoto(ctx context.Context, connectionID, digest string) (Photo, error) {
	var p Photo
	pk := connectionPK(connectionID)
	if err := s.get(ctx, pk, photoSK(digest), &p); err != nil {
		return Photo{}, err
	}
	if err := s.queryPrefix(ctx, pk, photoSK(digest)+"#", collect(&p.Tools)); err != nil {
		return Photo{}, err
	}
	if len(p.Tools) != p.Count {
		return Photo{}, fmt.Errorf("store: photograph %s of %s has %d of %d tools: %w", digest, connectionID, len(p.Tools), p.Count, ErrUnavailable)
	}
	return p, nil
}

// Binding is a run's frozen binding to a connection, at RUN#<id>/BIND#<connection id>.
type Binding struct {
	ConnectionID   string `dynamodbav:"connection_id"`
	ConnectionName string `dynamodbav:"connection_name"`
	Kind           string `dynamodbav:"kind"`
	// Owner is the personal connection's owner; "" for a shared one.
	Owner         string `dynamodbav:"owner"`
	Generation    int    `dynamodbav:"authorization_generation"`
	ToolSetDigest string `dynamodbav:"tool_set_digest"`
}

func bindingSK(connectionID string) string { return "BIND#" + connectionID }
