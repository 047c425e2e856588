package store

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// RetryConflicts is the SDK client option every DynamoDB client of
// fluidbox's uses: on top of the standard retryer (which retries
// throttling and 5xx), it retries TransactionConflictException, which
// DynamoDB answers a single-item write that meets an item an in-flight
// transaction holds, and which the SDK does not retry by itself. Nothing
// was written, so the retry is safe. It allows sdkAttempts attempts
// rather than the SDK's 3, as AWS's SDKs long did for DynamoDB: its
// throttling and conflicts are short-lived. A client's RetryMaxAttempts,
// when set, still wins.
//
// It also reads again a read whose answer was cut short (a 200 whose body
// ends early), which the SDK takes for a malformed answer and does not
// retry: a read changes nothing, so asking again is safe. A write's
// answer cut short is left to its caller: the write may have applied.
// And it keeps the client from cutting an answer short itself
// (BodyWithoutWriteTo).
func RetryConflicts(o *dynamodb.Options) {
	std := retry.NewStandard(func(so *retry.StandardOptions) { so.MaxAttempts = sdkAttempts })
	o.Retryer = retry.AddWithErrorCodes(std, "TransactionConflictException")
	o.APIOptions = append(o.APIOptions, retryTruncatedReads, BodyWithoutWriteTo)
}

// truncatedReadAttempts bounds how often a read whose answer was cut short
// is asked.
const truncatedReadAttempts = 3

// retryTruncatedReads asks a read again, whole, when its answer's body
// ended before its end.
func retryTruncatedReads(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("FluidboxRetryTruncatedReads", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		switch middleware.GetOperationName(ctx) {
		case "GetItem", "Query", "Scan", "BatchGetItem", "DescribeTable":
		default:
			return next.HandleInitialize(ctx, in)
		}
		for attempt := 1; ; attempt++ {
			out, md, err := next.HandleInitialize(ctx, in)
			var de *smithy.DeserializationError
			if err == nil || attempt == truncatedReadAttempts || !errors.As(err, &de) || !errors.Is(err, io.ErrUnexpectedEOF) || ctx.Err() != nil {
				return out, md, err
			}
		}
	}), middleware.After)
}

const sdkAttempts = 5

// Backoff of a retried transaction: full jitter over an exponentially
// growing window, for at most txAttempts attempts, and never past the
// context's deadline.
const (
	txAttempts   = 8
	txBackoffMin = 5 * time.Millisecond
	txBackoffMax = 250 * time.Millisecond
)

// retryableCancel says whether DynamoDB cancelled a transaction only for
// reasons that go away: another transaction in flight on one of its items
// (TransactionConflict) or throttling. A condition failure, or a reason
// that says the request is wrong, is the caller's answer, not noise.
func retryableCancel(tce *types.TransactionCanceledException) bool {
	retry := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None":
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
			retry = true
		default:
			return false
		}
	}
	return retry
}

// transactWrite runs one TransactWriteItems, retrying it while DynamoDB
// cancels it only for conflict or throttling and the context allows. A
// cancelled transaction wrote nothing, so the retry is the same request.
// It returns the last error as the SDK gave it.
func (s *Store) transactWrite(ctx context.Context, items []types.TransactWriteItem) error {
	return s.transactWriteN(ctx, items, txAttempts)
}

// hotAttempts bounds the retries of a transaction on a run's head (a head
// change, a numbering): every writer of the run's head meets the others
// there, and DynamoDB cancels all but one of those in flight at once, so
// a burst of them (approvals decided together, sequencers racing) needs
// more rounds than txAttempts to drain; the context's deadline still
// bounds them.
const hotAttempts = 32

// transactWriteN is transactWrite with at most attempts attempts.
func (s *Store) transactWriteN(ctx context.Context, items []types.TransactWriteItem, attempts int) error {
	window := txBackoffMin
	for attempt := 1; ; attempt++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tce *types.TransactionCanceledException
		if err == nil || attempt == attempts || !errors.As(err, &tce) || !retryableCancel(tce) {
			return err
		}
		wait := rand.N(window) + time.Millisecond
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		window = min(window*2, txBackoffMax)
	}
}

// BodyWithoutWriteTo hides the WriteTo method of a request's body, which
// cut answers short on a fast server. The SDK hands net/http its stream in
// a wrapper that reads as ended once closed, and closes it as soon as
// RoundTrip returns. net/http's Transport, having written Content-Length
// bytes, reads the body once more to see that nothing is left, through
// WriteTo when the body has it. When the server has answered and the SDK
// has closed the body before the writing goroutine gets there (a local
// server on a busy machine answers in microseconds), that WriteTo returns
// io.EOF, which io.Copy, unlike a Read's io.EOF, passes on as an error:
// the Transport takes it for a failed write and closes the connection
// under the answer being read, which the caller sees as a 200 whose body
// fails with "use of closed network connection" (in 1 request of ~200
// with 250 KB bodies, TestUpdateOverItemLimit's). Through Read, the same
// closed body just ends. Against DynamoDB the window is narrower (its
// answer crosses a network) but a busy Lambda instance can be as late,
// and there the SDK would retry the request, so that a conditional write
// that applied would fail its own condition on the retry.
// devstack.TestAnswerBeforeTheWriteEnds holds the write to make it happen.
// It is an API option for any AWS SDK client (the functions' aws.Config
// carries it, shared/function), and adding it twice adds it once.
func BodyWithoutWriteTo(stack *middleware.Stack) error {
	if _, ok := stack.Build.Get(bodyWithoutWriteToID); ok {
		return nil
	}
	return stack.Build.Add(middleware.BuildMiddlewareFunc(bodyWithoutWriteToID, func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
		req, ok := in.Request.(*smithyhttp.Request)
		if !ok {
			return next.HandleBuild(ctx, in)
		}
		s, ok := req.GetStream().(io.ReadSeeker)
		if _, writerTo := s.(io.WriterTo); !ok || !writerTo {
			return next.HandleBuild(ctx, in)
		}
		out, err := req.SetStream(readSeeker{s})
		if err != nil {
			return middleware.BuildOutput{}, middleware.Metadata{}, err
		}
		in.Request = out
		return next.HandleBuild(ctx, in)
	}), middleware.After)
}

const bodyWithoutWriteToID = "FluidboxBodyWithoutWriteTo"

// readSeeker is a stream with Read and Seek (the retryer rewinds a body
// with Seek) and nothing else.
type readSeeker struct{ io.ReadSeeker }
