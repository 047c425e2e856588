package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OAuth is what an OAuth connection keeps besides its sealed tokens (which
// are Connection.Sealed, under the connection id and generation): the
// client it authorizes as (the secret sealed), the scopes the operator
// asked for, and what discovery found, as the oauth package's JSON. None of
// it opens anything without a Sealer that can Open.
type OAuth struct {
	ClientID string `dynamodbav:"oauth_client_id,omitempty"`
	// ClientSecret is sealed (seal.Seal under "<id>#oauth-client", 1).
	ClientSecret     []byte `dynamodbav:"oauth_client_secret,omitempty"`
	ClientAuthMethod string `dynamodbav:"oauth_client_auth_method,omitempty"`
	ClientRegistered bool   `dynamodbav:"oauth_client_registered,omitempty"`
	// ClientIssuer is the authorization server the client belongs to: the
	// one it was registered at, or the one the operator named with it at
	// creation ("" only on an operator's client of a connection created
	// before issuers were named, bound by its first completed
	// authorization's discovery instead). It is presented nowhere else.
	ClientIssuer string `dynamodbav:"oauth_client_issuer,omitempty"`
	// ClientRedirectURI is the redirect URI a registered client was
	// registered with; a registration for another is not reused.
	ClientRedirectURI string   `dynamodbav:"oauth_client_redirect_uri,omitempty"`
	Scopes            []string `dynamodbav:"oauth_scopes,omitempty"`
	// Discovery is the JSON of the last authorization's discovery.
	Discovery string `dynamodbav:"oauth_discovery,omitempty"`
	// TokenExpiresAt is the access token's expiry (RFC 3339, "" unknown).
	TokenExpiresAt string `dynamodbav:"oauth_token_expires_at,omitempty"`
	// StepUpScope is every scope the upstream asked for in an
	// insufficient_scope challenge, with the scopes requested when it did,
	// as an RFC 6749 scope parameter (space-separated tokens): the next
	// authorization asks for them too (MCP step-up authorization).
	StepUpScope string `dynamodbav:"oauth_step_up_scope,omitempty"`
	// NoConsentPrompt: never send prompt=consent to an OpenID provider
	// (its tenant's administrator consented for every member).
	NoConsentPrompt bool `dynamodbav:"oauth_no_consent_prompt,omitempty"`
}

// OAuthState is one pending authorization, at OAUTHSTATE#<digest of the
// state>/HEAD: the state itself is a bearer of the authorization and never
// stored, only its digest. It is consumed once (ConsumeOAuthState).
type OAuthState struct {
	Digest       string `dynamodbav:"digest"`
	ConnectionID string `dynamodbav:"connection_id"`
	// Subject is the member who asked for the authorization URL.
	Subject string `dynamodbav:"subject"`
	// Generation is the connection's generation when the URL was made; the
	// callback moves it to Generation+1 only from there.
	Generation int `dynamodbav:"authorization_generation"`
	// Verifier is the PKCE verifier, sealed (seal.Seal under
	// "<connection id>#oauth-state#<digest>", 1).
	Verifier []byte `dynamodbav:"sealed_verifier"`
	// RedirectURI is the one the authorization request named: the response
	// is taken there only (its authorization server's own).
	RedirectURI string `dynamodbav:"redirect_uri"`
	Discovery   string `dynamodbav:"discovery"`
	// AuthorizeURL is the authorization request without its state (which
	// is never stored): the authorize redirect sends the browser there.
	AuthorizeURL string `dynamodbav:"authorize_url"`
	// NonceDigest is the SHA-256 of the nonce the authorize redirect set in
	// the browser it sent on; the callback is taken only from that browser.
	NonceDigest string `dynamodbav:"nonce_digest,omitempty"`
	StartedAt   string `dynamodbav:"started_at,omitempty"`
	ExpiresAt   string `dynamodbav:"expires_at"`
	CreatedAt   string `dynamodbav:"created_at"`
	ConsumedAt  string `dynamodbav:"consumed_at,omitempty"`
	// Expires is ExpiresAt in Unix seconds, the table's TTLAttribute:
	// DynamoDB deletes states nobody completed (some time after; a
	// callback checks ExpiresAt itself).
	Expires int64 `dynamodbav:"expires_epoch"`
}

func oauthStatePK(digest string) string { return "OAUTHSTATE#" + digest }

// PutOAuthState stores a new pending authorization.
func (s *Store) PutOAuthState(ctx context.Context, st OAuthState) error {
	av, err := item(oauthStatePK(st.Digest), "HEAD", st)
	if err != nil {
		return err
	}
	return s.transactOp(ctx, "put oauth state", []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(s.table), Item: av, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}})
}

// StartOAuthState records, once, the digest of the nonce the authorize
// redirect sets in a browser, and returns the pending authorization: a
// second start, a consumed state or one never stored is ErrNotFound.
func (s *Store) StartOAuthState(ctx context.Context, digest, nonceDigest, at string) (OAuthState, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 keyOf(oauthStatePK(digest), "HEAD"),
		UpdateExpression:    aws.String("SET nonce_digest = :n, started_at = :at"),
		ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(nonce_digest) AND attribute_not_exists(consumed_at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n": &types.AttributeValueMemberS{Value: nonceDigest}, ":at": &types.AttributeValueMemberS{Value: at},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err = translate("start oauth state", err); err != nil {
		if errors.Is(err, ErrConditionFailed) {
			return OAuthState{}, fmt.Errorf("store: oauth state: %w", ErrNotFound)
		}
		return OAuthState{}, err
	}
	var st OAuthState
	if err := attributevalue.UnmarshalMap(out.Attributes, &st); err != nil {
		return OAuthState{}, fmt.Errorf("store: decode oauth state: %w", err)
	}
	return st, nil
}

// ConsumeOAuthState marks the pending authorization used and returns it.
// It succeeds once per state: a second consumption, or a state never
// stored, is ErrNotFound.
func (s *Store) ConsumeOAuthState(ctx context.Context, digest, at string) (OAuthState, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyOf(oauthStatePK(digest), "HEAD"),
		UpdateExpression:          aws.String("SET consumed_at = :at"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND attribute_not_exists(consumed_at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": &types.AttributeValueMemberS{Value: at}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err = translate("consume oauth state", err); err != nil {
		if errors.Is(err, ErrConditionFailed) {
			return OAuthState{}, fmt.Errorf("store: oauth state: %w", ErrNotFound)
		}
		return OAuthState{}, err
	}
	var st OAuthState
	if err := attributevalue.UnmarshalMap(out.Attributes, &st); err != nil {
		return OAuthState{}, fmt.Errorf("store: decode oauth state: %w", err)
	}
	return st, nil
}

// SetOAuthClient records the client a connection authorizes as (after a
// dynamic registration at issuer, for redirectURI), conditioned on the generation the caller read and
// on the connection not being revoked: revocation keeps the generation and
// deletes the client secret, which a registration racing it must not put
// back.
func (s *Store) SetOAuthClient(ctx context.Context, id string, gen int, clientID string, sealedSecret []byte, method, issuer, redirectURI, at string) error {
	vals := map[string]types.AttributeValue{
		":cid": &types.AttributeValueMemberS{Value: clientID},
		":ru":  &types.AttributeValueMemberS{Value: redirectURI},
		":iss": &types.AttributeValueMemberS{Value: issuer},
		":m":   &types.AttributeValueMemberS{Value: method},
		":reg": &types.AttributeValueMemberBOOL{Value: true},
		":g":   num(int64(gen)),
		":at":  &types.AttributeValueMemberS{Value: at},
		":rev": &types.AttributeValueMemberS{Value: ConnectionRevoked},
	}
	expr := "SET oauth_client_id = :cid, oauth_client_auth_method = :m, oauth_client_registered = :reg, oauth_client_issuer = :iss, oauth_client_redirect_uri = :ru, updated_at = :at REMOVE oauth_client_secret"
	if len(sealedSecret) > 0 {
		expr = "SET oauth_client_id = :cid, oauth_client_auth_method = :m, oauth_client_registered = :reg, oauth_client_issuer = :iss, oauth_client_redirect_uri = :ru, updated_at = :at, oauth_client_secret = :sec"
		vals[":sec"] = &types.AttributeValueMemberB{Value: sealedSecret}
	}
	_, err := s.changeConnection(ctx, "set oauth client of", id, &dynamodb.UpdateItemInput{
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("authorization_generation = :g AND #status <> :rev"),
		ExpressionAttributeNames:  map[string]string{"#status": "status"},
		ExpressionAttributeValues: vals,
	})
	return err
}

// AuthorizeConnection stores tokens sealed for generation oldGen+1, the
// discovery they came from and their expiry, moves the generation there and
// makes the connection active: a compare-and-swap on the generation, from
// active or authorization_required only (never from revoked).
func (s *Store) AuthorizeConnection(ctx context.Context, id string, oldGen int, sealed []byte, discovery, expiresAt, at string) (Connection, error) {
	av, err := s.changeConnection(ctx, "authorize connection", id, &dynamodb.UpdateItemInput{
		UpdateExpression:         aws.String("SET authorization_generation = :new, sealed_credential = :sealed, #status = :active, oauth_discovery = :d, oauth_token_expires_at = :exp, updated_at = :at"),
		ConditionExpression:      aws.String("authorization_generation = :old AND (#status = :active OR #status = :required)"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":new":      num(int64(oldGen + 1)),
			":old":      num(int64(oldGen)),
			":sealed":   &types.AttributeValueMemberB{Value: sealed},
			":d":        &types.AttributeValueMemberS{Value: discovery},
			":exp":      &types.AttributeValueMemberS{Value: expiresAt},
			":at":       &types.AttributeValueMemberS{Value: at},
			":active":   &types.AttributeValueMemberS{Value: ConnectionActive},
			":required": &types.AttributeValueMemberS{Value: ConnectionAuthorizationRequired},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return Connection{}, err
	}
	return decodeConnection(id, av)
}

// StoreRefreshedTokens replaces the sealed tokens of generation gen with
// refreshed ones (the generation stays: a refresh is not a
// re-authorization), only if the sealed tokens are still old, the ones the
// refresh started from, and the connection is active.
func (s *Store) StoreRefreshedTokens(ctx context.Context, id string, gen int, old, sealed []byte, expiresAt, at string) error {
	_, err := s.changeConnection(ctx, "store refreshed tokens of", id, &dynamodb.UpdateItemInput{
		UpdateExpression:         aws.String("SET sealed_credential = :sealed, oauth_token_expires_at = :exp, updated_at = :at"),
		ConditionExpression:      aws.String("authorization_generation = :g AND sealed_credential = :old AND #status = :active"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g":      num(int64(gen)),
			":old":    &types.AttributeValueMemberB{Value: old},
			":sealed": &types.AttributeValueMemberB{Value: sealed},
			":exp":    &types.AttributeValueMemberS{Value: expiresAt},
			":at":     &types.AttributeValueMemberS{Value: at},
			":active": &types.AttributeValueMemberS{Value: ConnectionActive},
		},
	})
	return err
}

// RequireAuthorization puts an active connection of generation gen whose
// sealed tokens are still old into authorization_required and deletes
// them: its grant was refused for good. The generation stays; the next
// authorization moves it.
func (s *Store) RequireAuthorization(ctx context.Context, id string, gen int, old []byte, at string) error {
	_, err := s.changeConnection(ctx, "require authorization of", id, &dynamodb.UpdateItemInput{
		UpdateExpression:         aws.String("SET #status = :required, updated_at = :at REMOVE sealed_credential, oauth_token_expires_at"),
		ConditionExpression:      aws.String("authorization_generation = :g AND sealed_credential = :old AND #status = :active"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g":        num(int64(gen)),
			":old":      &types.AttributeValueMemberB{Value: old},
			":at":       &types.AttributeValueMemberS{Value: at},
			":active":   &types.AttributeValueMemberS{Value: ConnectionActive},
			":required": &types.AttributeValueMemberS{Value: ConnectionAuthorizationRequired},
		},
	})
	return err
}

// RecordStepUpScope replaces the step-up scopes of an active connection of
// generation gen with scope, a compare-and-swap on the value the caller
// read (old, "" for none), so that concurrent challenges each widen the
// union the caller computed rather than overwrite one another. Neither the
// generation nor the status moves: calls the current grant allows keep
// working until the connection is re-authorized.
func (s *Store) RecordStepUpScope(ctx context.Context, id string, gen int, old, scope, at string) error {
	cond := "authorization_generation = :g AND #status = :active AND oauth_step_up_scope = :old"
	if old == "" {
		cond = "authorization_generation = :g AND #status = :active AND (attribute_not_exists(oauth_step_up_scope) OR oauth_step_up_scope = :old)"
	}
	_, err := s.changeConnection(ctx, "record step-up scopes of", id, &dynamodb.UpdateItemInput{
		UpdateExpression:         aws.String("SET oauth_step_up_scope = :scope, updated_at = :at"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g":      num(int64(gen)),
			":old":    &types.AttributeValueMemberS{Value: old},
			":scope":  &types.AttributeValueMemberS{Value: scope},
			":at":     &types.AttributeValueMemberS{Value: at},
			":active": &types.AttributeValueMemberS{Value: ConnectionActive},
		},
	})
	return err
}

// ErrLeaseHeld: another holder's refresh lease is live.
var ErrLeaseHeld = fmt.Errorf("store: refresh lease held: %w", ErrConditionFailed)

const leaseSK = "OAUTHLEASE"

// AcquireRefreshLease takes the connection's refresh lease (CON#<id>/
// OAUTHLEASE) for holder until untilMS (Unix milliseconds), if it is free or
// its holder's time ran out at nowMS. Only the holder refreshes, so a
// rotating refresh token is redeemed once across every instance.
func (s *Store) AcquireRefreshLease(ctx context.Context, id, holder string, nowMS, untilMS int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 keyOf(connectionPK(id), leaseSK),
		UpdateExpression:    aws.String("SET holder = :h, until_ms = :until"),
		ConditionExpression: aws.String("attribute_not_exists(holder) OR until_ms < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":h":     &types.AttributeValueMemberS{Value: holder},
			":until": &types.AttributeValueMemberN{Value: strconv.FormatInt(untilMS, 10)},
			":now":   &types.AttributeValueMemberN{Value: strconv.FormatInt(nowMS, 10)},
		},
	})
	if err = translate("acquire refresh lease of "+id, err); errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: refresh lease of %s: %w", id, ErrLeaseHeld)
	}
	return err
}

// ReleaseRefreshLease frees the lease if holder still holds it, by ending
// its time (the item stays; an ended lease is a free one).
func (s *Store) ReleaseRefreshLease(ctx context.Context, id, holder string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyOf(connectionPK(id), leaseSK),
		UpdateExpression:          aws.String("SET until_ms = :zero"),
		ConditionExpression:       aws.String("holder = :h"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberS{Value: holder}, ":zero": num(0)},
	})
	if err = translate("release refresh lease of "+id, err); errors.Is(err, ErrConditionFailed) {
		return nil // taken over after it ran out: nothing of ours to free
	}
	return err
}
