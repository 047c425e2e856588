package store

import (
	"context"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// InputRequest is an upstream's request for a person's input in the middle
// of a brokered call (an MCP URL-mode elicitation), waiting for (or settled
// by) someone who may decide the call. It is kept in its run's partition
// under its call (INP#<tool_call_id>#<id>), beside but apart from the
// call's approval: a call has at most one approval and may meet more than
// one input request. While pending it is in the sparse index gsi1 under
// InputsIndex, sorted by request time; settling removes it from there.
type InputRequest struct {
	ID           string `dynamodbav:"id"`
	RunID        string `dynamodbav:"run_id"`
	ToolCallID   string `dynamodbav:"tool_call_id"`
	ToolName     string `dynamodbav:"tool_name"`
	ConnectionID string `dynamodbav:"connection_id"`
	// Server is the connection's name as fluidbox knows it, never a name
	// the upstream gave itself.
	Server string `dynamodbav:"server"`
	Mode   string `dynamodbav:"mode"`
	// Link is the request's URL as a person is shown it and the ledger
	// keeps it: scheme, host and path only (shared/broker strips the
	// query, fragment and user info).
	Link string `dynamodbav:"link"`
	// URL is the link as the person must open it, with its query (the
	// upstream's state): kept here for the people who answer, like an
	// approval's input, and never in the ledger. "" when it could not be
	// shown (it held the connection's credential).
	URL         string `dynamodbav:"url,omitempty"`
	Status      string `dynamodbav:"status"`
	RequestedAt string `dynamodbav:"requested_at"`
	ExpiresAt   string `dynamodbav:"expires_at"`
	DecidedBy   string `dynamodbav:"decided_by,omitempty"`
	DecidedAt   string `dynamodbav:"decided_at,omitempty"`
	// Personal marks a call riding a personal connection: only the run's
	// invoker may answer it, as for the call's approval.
	Personal bool `dynamodbav:"personal,omitempty"`
	// Counted marks a request filed with the run's count of pending input
	// requests moved by one (those filed before the count existed were
	// not): its settlement moves the count back.
	Counted bool `dynamodbav:"counted,omitempty"`
}

// pendingInputRequest is an input request row while it is pending.
type pendingInputRequest struct {
	InputRequest
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

// inputRequestRef points from an input request's id to its row.
type inputRequestRef struct {
	RunID      string `dynamodbav:"run_id"`
	ToolCallID string `dynamodbav:"tool_call_id"`
}

// InputsIndex is the gsi1 partition of pending input requests.
const InputsIndex = "INPUTS"

func inputCallPrefix(toolCallID string) string { return "INP#" + toolCallID + "#" }

// InputRequestKey is the key of a run's input request row.
func InputRequestKey(runID, toolCallID, id string) Key {
	return Key{runPK(runID), inputCallPrefix(toolCallID) + id}
}

// InputRequestRefKey is the key of the pointer from an input request's id
// to its row.
func InputRequestRefKey(id string) Key { return Key{"INPID#" + id, "HEAD"} }

// InputRequestPosition is an input request's place in the pending list
// (request time, then id): its sort key in the index.
func InputRequestPosition(r InputRequest) string { return r.RequestedAt + "#" + r.ID }

// NewInputRequestOps are the ops that file r, pending, and its id's
// pointer: both new (otherwise the Append fails with failed).
func (s *Store) NewInputRequestOps(r InputRequest, failed error) ([]Op, error) {
	row, err := s.PutNew(InputRequestKey(r.RunID, r.ToolCallID, r.ID),
		pendingInputRequest{InputRequest: r, GSI1PK: InputsIndex, GSI1SK: InputRequestPosition(r)}, failed)
	if err != nil {
		return nil, err
	}
	ref, err := s.PutNew(InputRequestRefKey(r.ID), inputRequestRef{RunID: r.RunID, ToolCallID: r.ToolCallID}, failed)
	if err != nil {
		return nil, err
	}
	return []Op{row, ref}, nil
}

// InputSettlement is one move of an input request out of pending.
type InputSettlement struct {
	// From is the status the row must have (pending), To the one it gets.
	From, To string
	By, At   string
	// Expiry: the move is an expiry, which holds only once the request
	// is overdue at At; any other move holds only before that.
	Expiry bool
}

// SettleInputRequestOp is the compare-and-swap that settles r: status From
// becomes To, and the row leaves the pending index, only while it is From
// and (by Expiry) unexpired or overdue at At. Otherwise the Append fails
// with failed. Racing settlements of one request thus settle it once.
func (s *Store) SettleInputRequestOp(r InputRequest, m InputSettlement, failed error) (Op, error) {
	cond := "#s = :from AND expires_at > :at"
	if m.Expiry {
		cond = "#s = :from AND expires_at <= :at"
	}
	return s.updateOp(InputRequestKey(r.RunID, r.ToolCallID, r.ID), Update{
		Set:    map[string]any{"status": m.To, "decided_by": m.By, "decided_at": m.At},
		Remove: []string{attrGSI1PK, attrGSI1SK},
		Cond:   cond, Names: map[string]string{"#s": "status"},
		Values: map[string]any{":from": m.From, ":at": m.At},
	}, failed)
}

// GetInputRequestByID reads an input request by its id.
func (s *Store) GetInputRequestByID(ctx context.Context, id string) (InputRequest, error) {
	var ref inputRequestRef
	k := InputRequestRefKey(id)
	if err := s.get(ctx, k.PK, k.SK, &ref); err != nil {
		return InputRequest{}, err
	}
	var r InputRequest
	rk := InputRequestKey(ref.RunID, ref.ToolCallID, id)
	err := s.get(ctx, rk.PK, rk.SK, &r)
	return r, err
}

// CallInputRequests lists the input requests of one call, oldest first: a
// consistent read of the run's partition.
func (s *Store) CallInputRequests(ctx context.Context, runID, toolCallID string) ([]InputRequest, error) {
	var out []InputRequest
	if err := s.queryPrefix(ctx, runPK(runID), inputCallPrefix(toolCallID), collect(&out)); err != nil {
		return nil, err
	}
	sortInputRequests(out)
	return out, nil
}

// RunInputRequests lists every input request of a run, any status, oldest
// first.
func (s *Store) RunInputRequests(ctx context.Context, runID string) ([]InputRequest, error) {
	var out []InputRequest
	if err := s.queryPrefix(ctx, runPK(runID), "INP#", collect(&out)); err != nil {
		return nil, err
	}
	sortInputRequests(out)
	return out, nil
}

func sortInputRequests(rs []InputRequest) {
	slices.SortFunc(rs, func(a, b InputRequest) int {
		return strings.Compare(InputRequestPosition(a), InputRequestPosition(b))
	})
}

// PendingInputRequestsAfter lists pending input requests across runs in
// request order, those after position after ("" from the start), at most
// limit. The index is eventually consistent: callers re-read a row before
// acting on it.
func (s *Store) PendingInputRequestsAfter(ctx context.Context, after string, limit int) ([]InputRequest, error) {
	return listIndex[InputRequest](ctx, s, indexQuery{op: "pending input requests", item: "input request", pk: InputsIndex, after: after, limit: limit})
}

// EachPendingInputRequest visits every pending input request, oldest
// first, until visit returns an error (returned as is). visit may settle
// the request it is given.
func (s *Store) EachPendingInputRequest(ctx context.Context, visit func(InputRequest) error) error {
	return eachIndex(ctx, s, indexQuery{op: "pending input requests", item: "input request", pk: InputsIndex}, visit)
}

// eachIndex visits q's partition of gsi1 as values of T, one page at a
// time, until visit returns an error (returned as is, not as a decode
// error).
func eachIndex[T any](ctx context.Context, s *Store, q indexQuery, visit func(T) error) error {
	var visitErr error
	err := s.queryIndex(ctx, q, func(av map[string]types.AttributeValue) error {
		var v T
		if err := attributevalue.UnmarshalMap(av, &v); err != nil {
			return err
		}
		if err := visit(v); err != nil {
			visitErr = err
			return err
		}
		return nil
	})
	if visitErr != nil {
		return visitErr
	}
	return err
}
