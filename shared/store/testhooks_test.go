package store

// The store's unexported writes, exported to its own tests (this file is
// compiled only for them).

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// UpdateOp and UpdateItem are the generic writes, for their own tests.
func (s *Store) UpdateOp(k Key, u Update, failed error) (Op, error) { return s.updateOp(k, u, failed) }

func (s *Store) UpdateItem(ctx context.Context, op string, k Key, u Update, old any) error {
	return s.updateItem(ctx, op, k, u, old)
}

// WriteOps writes ops in one transaction outside any run's ledger, as the
// conformance suite of the moves applies one move's ops alone; a failed
// condition is the failing op's error.
func (s *Store) WriteOps(ctx context.Context, ops ...Op) error {
	items := make([]types.TransactWriteItem, len(ops))
	for i, op := range ops {
		items[i] = op.item
	}
	err := s.transactWrite(ctx, items)
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		if ferr := opFailure("write ops", tce.CancellationReasons, 0, ops); ferr != nil {
			return ferr
		}
	}
	return translate("write ops", err)
}
