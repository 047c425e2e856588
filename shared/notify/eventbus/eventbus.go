// Package eventbus publishes notifications (package notify's entries) to an
// EventBridge bus. It is a package of its own so that only the notify
// function links the EventBridge client: `fluidbox dev` prints
// notifications instead and need not compile it.
package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/fluidbox/fluidbox/shared/notify"
)

// maxPutEntries is PutEvents' limit of entries per request.
const maxPutEntries = 10

// Publisher publishes notifications to an event bus.
type Publisher struct {
	client *eventbridge.Client
	bus    string
}

var _ notify.Publisher = (*Publisher)(nil)

// New returns a publisher to the named bus.
func New(client *eventbridge.Client, bus string) *Publisher {
	return &Publisher{client: client, bus: bus}
}

// Publish puts entries on the bus, at most ten a request, in order. It
// stops at the first request that fails or has a failed entry
// (FailedEntryCount > 0), so that a retry resumes where delivery stopped.
func (b *Publisher) Publish(ctx context.Context, entries []notify.Entry) error {
	for start := 0; start < len(entries); start += maxPutEntries {
		chunk := entries[start:min(start+maxPutEntries, len(entries))]
		in := &eventbridge.PutEventsInput{Entries: make([]types.PutEventsRequestEntry, len(chunk))}
		for i, e := range chunk {
			detail, err := json.Marshal(e.Detail)
			if err != nil {
				return &notify.PublishError{First: start + i, Err: err}
			}
			in.Entries[i] = types.PutEventsRequestEntry{
				Source:       aws.String(notify.Source),
				DetailType:   aws.String(string(e.Type)),
				Detail:       aws.String(string(detail)),
				EventBusName: aws.String(b.bus),
			}
		}
		out, err := b.client.PutEvents(ctx, in)
		if err != nil {
			return &notify.PublishError{First: start, Err: fmt.Errorf("put events on %s: %w", b.bus, err)}
		}
		if out.FailedEntryCount > 0 {
			for i, r := range out.Entries {
				if r.ErrorCode != nil {
					return &notify.PublishError{First: start + i, Err: fmt.Errorf("put events on %s: %d of %d entries failed, first %s: %s",
						b.bus, out.FailedEntryCount, len(chunk), aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))}
				}
			}
			return &notify.PublishError{First: start, Err: errors.New("put events: entries failed without an error code")}
		}
	}
	return nil
}
