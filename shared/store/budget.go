package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ReservationByProxy is the Origin of a reservation the model proxy booked.
// Persisted: never rename.
const ReservationByProxy = "proxy"

// Reservation statuses. They are persisted: never rename.
const (
	ReservationOpen       = "open"
	ReservationReconciled = "reconciled"
	ReservationSwept      = "swept"
)

// Reservation is money booked against a run before a model request is
// forwarded, keyed by the request's id (RES#<request_id>) in the run's
// partition. It carries the price it was booked at, so reconciling it later
// costs the usage at the same rates even if the price table has changed.
// While open it is in gsi1 under one of openShards partitions, sorted by
// creation time, which is how the sweep finds the stale ones.
type Reservation struct {
	ID                    string `dynamodbav:"reservation_id"`
	RunID                 string `dynamodbav:"run_id"`
	RequestID             string `dynamodbav:"request_id"`
	Model                 string `dynamodbav:"model"`
	MaxOutputTokens       int64  `dynamodbav:"max_output_tokens"`
	InputTokensUpperBound int64  `dynamodbav:"input_tokens_upper_bound"`
	Amount                int64  `dynamodbav:"amount"`
	// The price booked at, micro-USD per million tokens.
	InputPerMTok      int64 `dynamodbav:"price_input"`
	OutputPerMTok     int64 `dynamodbav:"price_output"`
	CacheReadPerMTok  int64 `dynamodbav:"price_cache_read"`
	CacheWritePerMTok int64 `dynamodbav:"price_cache_write"`
	// Added with the model proxy's inspection; absent on older items.
	CacheWrite1hPerMTok int64 `dynamodbav:"price_cache_write_1h,omitempty"`
	WebSearchPerUse     int64 `dynamodbav:"price_web_search,omitempty"`
	WebSearches         int64 `dynamodbav:"web_searches,omitempty"`
	// Origin is ReservationByProxy for what the model proxy booked, which
	// only the proxy and the sweep may settle; "" for a runner's own.
	Origin    string `dynamodbav:"origin,omitempty"`
	CreatedAt string `dynamodbav:"created_at"`
	Status    string `dynamodbav:"status"`
	// Set when the reservation is closed.
	Cost       int64  `dynamodbav:"cost"`
	Settlement string `dynamodbav:"settlement,omitempty"`
	ClosedAt   string `dynamodbav:"closed_at,omitempty"`
}

// Usage is the usage entry of a closed reservation (USE#<request_id>, the
// reservation's own key): what was consumed and what it cost. It exists at
// most once per reservation, which is what makes a repeated or late
// reconciliation change nothing.
type Usage struct {
	ReservationID            string `dynamodbav:"reservation_id"`
	RequestID                string `dynamodbav:"request_id"`
	InputTokens              int64  `dynamodbav:"input_tokens"`
	OutputTokens             int64  `dynamodbav:"output_tokens"`
	CacheReadInputTokens     int64  `dynamodbav:"cache_read_input_tokens"`
	CacheCreationInputTokens int64  `dynamodbav:"cache_creation_input_tokens"`
	// Added with server tools and cache TTLs; absent when zero or empty.
	CacheCreation1hInputTokens int64            `dynamodbav:"cache_creation_1h_input_tokens,omitempty"`
	WebSearchRequests          int64            `dynamodbav:"web_search_requests,omitempty"`
	WebFetchRequests           int64            `dynamodbav:"web_fetch_requests,omitempty"`
	ServerToolUses             map[string]int64 `dynamodbav:"server_tool_uses,omitempty"`
	Cost                       int64            `dynamodbav:"cost"`
	Settlement                 string           `dynamodbav:"settlement"`
	At                         string           `dynamodbav:"at"`
}

type openReservation struct {
	Reservation
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

// openShards spreads open reservations over several index partitions: every
// model request writes one index entry and removes it again, and on a
// single index partition all runs of a deployment would share its write
// limit.
const openShards = 16

func openShard(runID string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runID))
	return openShardPK(h.Sum32() % openShards)
}

func openShardPK(n uint32) string { return fmt.Sprintf("RESOPEN#%02d", n) }

func reservationSK(requestID string) string { return "RES#" + requestID }
func usageSK(requestID string) string       { return "USE#" + requestID }

// Errors of the budget operations.
var (
	// ErrReservationExists: a reservation with this request id exists.
	ErrReservationExists = fmt.Errorf("store: reservation exists: %w", ErrExists)
	// ErrUsageExists: the reservation's usage entry is already written.
	ErrUsageExists = fmt.Errorf("store: usage already recorded: %w", ErrExists)
	// ErrReservationClosed: the reservation is no longer open.
	ErrReservationClosed = fmt.Errorf("store: reservation already closed: %w", ErrConditionFailed)
)

// PutReservation books a new open reservation; it fails with
// ErrReservationExists if the request id was used before.
func (s *Store) PutReservation(r Reservation) (Op, error) {
	r.Status = ReservationOpen
	av, err := item(runPK(r.RunID), reservationSK(r.RequestID), openReservation{
		Reservation: r,
		GSI1PK:      openShard(r.RunID),
		GSI1SK:      r.CreatedAt + "#" + r.RunID + "#" + r.RequestID,
	})
	if err != nil {
		return Op{}, err
	}
	return Op{item: putNew(s.table, av), failed: ErrReservationExists}, nil
}

// PutUsage writes a reservation's usage entry; it fails with ErrUsageExists
// if one is written already.
func (s *Store) PutUsage(runID string, u Usage) (Op, error) {
	av, err := item(runPK(runID), usageSK(u.RequestID), u)
	if err != nil {
		return Op{}, err
	}
	return Op{item: putNew(s.table, av), failed: ErrUsageExists}, nil
}

// CloseReservation is the compare-and-swap that ends a reservation: it
// holds only while the reservation is open, records its cost and how it was
// settled, and takes it out of the open index.
func (s *Store) CloseReservation(runID, requestID, status string, cost int64, settlement, at string) Op {
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:                aws.String(s.table),
		Key:                      keyOf(runPK(runID), reservationSK(requestID)),
		UpdateExpression:         aws.String("SET #status = :status, cost = :cost, settlement = :settlement, closed_at = :at REMOVE gsi1pk, gsi1sk"),
		ConditionExpression:      aws.String("#status = :open"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":open":       &types.AttributeValueMemberS{Value: ReservationOpen},
			":status":     &types.AttributeValueMemberS{Value: status},
			":cost":       num(cost),
			":settlement": &types.AttributeValueMemberS{Value: settlement},
			":at":         &types.AttributeValueMemberS{Value: at},
		},
	}}, failed: ErrReservationClosed}
}

// GetReservation reads a run's reservation for a request id.
func (s *Store) GetReservation(ctx context.Context, runID, requestID string) (Reservation, error) {
	var r Reservation
	err := s.get(ctx, runPK(runID), reservationSK(requestID), &r)
	return r, err
}

// GetUsage reads a reservation's usage entry.
func (s *Store) GetUsage(ctx context.Context, runID, requestID string) (Usage, error) {
	var u Usage
	err := s.get(ctx, runPK(runID), usageSK(requestID), &u)
	return u, err
}

// RunReservations lists every reservation of a run, any status.
func (s *Store) RunReservations(ctx context.Context, runID string) ([]Reservation, error) {
	var out []Reservation
	err := s.queryPrefix(ctx, runPK(runID), "RES#", collect(&out))
	return out, err
}

// OpenReservations lists reservations still open that were created before
// `before` (a FormatTime string), across runs, at most limit. The index is
// eventually consistent: a listed reservation may have been closed since,
// which the close's own condition catches.
func (s *Store) OpenReservations(ctx context.Context, before string, limit int) ([]Reservation, error) {
	if before == "" {
		return nil, nil // no sort key is below ""; an empty before must not list them all
	}
	var out []Reservation
	for shard := range uint32(openShards) {
		q := indexQuery{op: "open reservations", item: "reservation", pk: openShardPK(shard), before: before}
		if limit > 0 {
			q.limit = limit - len(out)
		}
		if err := s.queryIndex(ctx, q, collect(&out)); err != nil {
			return nil, err
		}
		if limit > 0 && len(out) == limit {
			return out, nil
		}
	}
	return out, nil
}

// EachOpenReservation visits every reservation still open that was created
// before `before`, shard by shard, one page of the index at a time, until
// visit returns an error (returned as is). visit may close the reservation
// it is given.
func (s *Store) EachOpenReservation(ctx context.Context, before string, visit func(Reservation) error) error {
	if before == "" {
		return nil
	}
	for shard := range uint32(openShards) {
		q := indexQuery{op: "open reservations", item: "reservation", pk: openShardPK(shard), before: before}
		if err := eachIndex(ctx, s, q, visit); err != nil {
			return err
		}
	}
	return nil
}

// ModelUpstream is where the model proxy forwards to and the operator's
// credential for it, sealed under seal.Context{ConnectionID:
// "model-upstream", Generation: Generation}. There is one per deployment.
type ModelUpstream struct {
	URL            string `dynamodbav:"url"`
	CredentialType string `dynamodbav:"credential_type"`
	Sealed         []byte `dynamodbav:"sealed"`
	Generation     int    `dynamodbav:"generation"`
	UpdatedAt      string `dynamodbav:"updated_at"`
	UpdatedBy      string `dynamodbav:"updated_by"`
}

const modelUpstreamPK = "MODELUPSTREAM"

// ErrModelUpstreamChanged: someone replaced the model upstream since it was read.
var ErrModelUpstreamChanged = fmt.Errorf("store: model upstream changed: %w", ErrConditionFailed)

// PutModelUpstream writes the model upstream if its stored generation is
// still prev (0: none stored yet): a compare-and-swap, so two concurrent
// replacements cannot both claim the same generation.
func (s *Store) PutModelUpstream(ctx context.Context, m ModelUpstream, prev int) error {
	return s.putGeneration(ctx, modelUpstreamPK, "put model upstream", m, prev, ErrModelUpstreamChanged)
}

// putGeneration writes a deployment's one sealed setting (pk/HEAD) if its
// stored generation is still prev (0: none stored yet); a lost race is
// changed.
func (s *Store) putGeneration(ctx context.Context, pk, op string, v any, prev int, changed error) error {
	av, err := item(pk, "HEAD", v)
	if err != nil {
		return err
	}
	cond := "attribute_not_exists(pk)"
	vals := map[string]types.AttributeValue(nil)
	if prev > 0 {
		cond = "generation = :prev"
		vals = map[string]types.AttributeValue{":prev": num(int64(prev))}
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      av,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	if err != nil {
		err = translate(op, err)
		if errors.Is(err, ErrConditionFailed) {
			return changed
		}
	}
	return err
}

// GetModelUpstream reads the model upstream.
func (s *Store) GetModelUpstream(ctx context.Context) (ModelUpstream, error) {
	var m ModelUpstream
	err := s.get(ctx, modelUpstreamPK, "HEAD", &m)
	return m, err
}
