package store

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestConflictsOf: how a decision reads its cancelled transaction: only the
// fence shard held (retry at once on another), only its own items held
// (retry after a jitter), or anything else (back off).
func TestConflictsOf(t *testing.T) {
	r := func(codes ...string) []types.CancellationReason {
		out := make([]types.CancellationReason, len(codes))
		for i, c := range codes {
			out[i].Code = aws.String(c)
		}
		return out
	}
	for _, tc := range []struct {
		reasons         []types.CancellationReason
		fence, conflict bool
	}{
		{r("TransactionConflict", "None", "None"), true, true},
		{r("TransactionConflict", "", ""), true, true},
		{r("None", "TransactionConflict", "None"), false, true},
		{r("TransactionConflict", "TransactionConflict"), false, true},
		{r("None", "ThrottlingError"), false, false},
		{r("TransactionConflict", "ThrottlingError"), false, false},
		{r("ConditionalCheckFailed", "None"), false, false},
		{nil, false, true},
	} {
		fence, only := conflictsOf(tc.reasons)
		if fence != tc.fence || only != tc.conflict {
			t.Errorf("conflictsOf(%v) = %t, %t; want %t, %t", tc.reasons, fence, only, tc.fence, tc.conflict)
		}
	}
}
