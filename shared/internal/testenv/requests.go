package testenv

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// Requests counts the DynamoDB requests of the clients it is an option of
// (Option), by operation. A test that counts requests makes its table
// calm (Calm), so that no retried request counts twice.
type Requests struct {
	mu sync.Mutex
	n  map[string]int
}

// Option is the client option that counts.
func (r *Requests) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountRequests", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			r.mu.Lock()
			if r.n == nil {
				r.n = map[string]int{}
			}
			r.n[middleware.GetOperationName(ctx)]++
			r.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// Take returns the counts since the last Take (or since the start) and
// starts again from none.
func (r *Requests) Take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.n
	if out == nil {
		out = map[string]int{}
	}
	r.n = nil
	return out
}
