package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// maxPutEntries is PutEvents' limit of entries per request.
const maxPutEntries = 10

// EventBridge publishes notifications to an event bus.
type EventBridge struct {
	client *eventbridge.Client
	bus    string
}

var _ Publisher = (*EventBridge)(nil)

// NewEventBridge returns a publisher to the named bus.
func NewEventBridge(client *eventbridge.Client, bus string) *EventBridge {
	return &EventBridge{client: client, bus: bus}
}

// Publish puts entries on the bus, at most ten a request, in order. It
// stops at the first request that fails or has a failed entry
// (FailedEntryCount > 0), so that a retry resumes where delivery stopped.
func (b *EventBridge) Publish(ctx context.Context, entries []Entry) error {
	for start := 0; start < len(entries); start += maxPutEntries {
		chunk := entries[start:min(start+maxPutEntries, len(entries))]
		in := &eventbridge.PutEventsInput{Entries: make([]types.PutEventsRequestEntry, len(chunk))}
		for i, e := range chunk {
			detail, err := json.Marshal(e.Detail)
			if err != nil {
				return &PublishError{First: start + i, Err: err}
			}
			in.Entries[i] = types.PutEventsRequestEntry{
				Source:       aws.String(Source),
				DetailType:   aws.String(string(e.Type)),
				Detail:       aws.String(string(detail)),
				EventBusName: aws.String(b.bus),
			}
		}
		out, err := b.client.PutEvents(ctx, in)
		if err != nil {
			return &PublishError{First: start, Err: fmt.Errorf("put events on %s: %w", b.bus, err)}
		}
		if out.FailedEntryCount > 0 {
			for i, r := range out.Entries {
				if r.ErrorCode != nil {
					return &PublishError{First: start + i, Err: fmt.Errorf("put events on %s: %d of %d entries failed, first %s: %s",
						b.bus, out.FailedEntryCount, len(chunk), aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))}
				}
			}
			return &PublishError{First: start, Err: errors.New("put events: entries failed without an error code")}
		}
	}
	return nil
}
