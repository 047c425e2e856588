package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// streamIdle is how long a stream may be silent before it is taken for
// dead: the server sends a keep-alive comment every 15 seconds.
const streamIdle = 45 * time.Second

// maxSSELine bounds one line of an event stream.
const maxSSELine = 1 << 20

// Stream is one server-sent-events connection to a run's timeline. It is
// not safe for concurrent use.
type Stream struct {
	body   io.ReadCloser
	sc     *bufio.Scanner
	cancel context.CancelFunc
	idle   *time.Timer
	once   sync.Once
	// Last is the seq of the last event Next returned.
	Last int64
}

// Stream opens one event stream of a run, starting after the event whose
// seq is lastEventID (sent as Last-Event-ID). It does not reconnect: see
// Follow for that.
func (c *Client) Stream(ctx context.Context, sessionID string, lastEventID int64) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/sessions/"+pathID(sessionID)+"/events", nil, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := c.send(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("client: the events stream answered %q, not text/event-stream", ct)
	}
	s := &Stream{body: resp.Body, cancel: cancel, Last: lastEventID}
	s.sc = bufio.NewScanner(resp.Body)
	s.sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	// Silence for longer than the keep-alive period means a dead
	// connection that TCP has not noticed: cut it, so Next returns.
	s.idle = time.AfterFunc(streamIdle, cancel)
	return s, nil
}

// Next returns the next event, io.EOF when the server ended the stream,
// or another error when the connection broke.
func (s *Stream) Next() (Event, error) {
	var data strings.Builder
	var id string
	for s.sc.Scan() {
		s.idle.Reset(streamIdle)
		line := s.sc.Text()
		if line == "" { // end of one event
			if data.Len() == 0 {
				id = ""
				continue
			}
			var e Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return Event{}, fmt.Errorf("client: an event of the stream is not JSON: %w", err)
			}
			if id != "" {
				if n, err := strconv.ParseInt(id, 10, 64); err == nil && e.Seq == 0 {
					e.Seq = n
				}
			}
			s.Last = e.Seq
			return e, nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a comment: keep-alive
		case "id":
			id = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *Stream) Close() error {
	s.once.Do(func() {
		s.idle.Stop()
		s.cancel()
		s.body.Close()
	})
	return nil
}

// FollowOptions tune Follow.
type FollowOptions struct {
	// OnReconnect, if set, is told each time Follow connects again after a
	// dropped connection or a failed attempt, with the cause.
	OnReconnect func(after int64, cause error)
	// MaxBackoff bounds the pause between failed attempts (default 5s).
	MaxBackoff time.Duration
}

// Follow streams a run's events with seq > after to fn, in order, until ctx
// is done (it then returns ctx.Err()) or fn returns an error (returned as
// is). When the connection drops or the server ends the stream, it
// reconnects with Last-Event-ID set to the last event delivered, so every
// event reaches fn exactly once. An answer of the API (a wrong token, an
// unknown run) ends it with that *APIError; an unreachable server is tried
// again with a growing pause.
func (c *Client) Follow(ctx context.Context, sessionID string, after int64, fn func(Event) error, opt FollowOptions) error {
	maxBackoff := opt.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 5 * time.Second
	}
	backoff := time.Duration(0)
	var cause error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if opt.OnReconnect != nil {
				opt.OnReconnect(after, cause)
			}
			if !sleep(ctx, backoff) {
				return ctx.Err()
			}
		}
		s, err := c.Stream(ctx, sessionID, after)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !transient(err) {
				return err
			}
			cause = err
			backoff = min(max(2*backoff, 250*time.Millisecond), maxBackoff)
			continue
		}
		opened := time.Now()
		got, err := deliver(s, after, fn)
		s.Close()
		switch {
		case got > after, time.Since(opened) > time.Second:
			// Progress, or a stream that lived: reconnect at once.
			after, backoff = max(after, got), 0
		default:
			backoff = min(max(2*backoff, 250*time.Millisecond), maxBackoff)
		}
		var fnErr *callbackError
		switch {
		case errors.As(err, &fnErr):
			return fnErr.err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		cause = err
	}
}

type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// deliver passes a stream's events after `after` to fn and returns the seq
// of the last one delivered with the error that ended the stream.
func deliver(s *Stream, after int64, fn func(Event) error) (int64, error) {
	for {
		e, err := s.Next()
		if err != nil {
			return after, err
		}
		if e.Seq <= after { // never twice, whatever the server resends
			continue
		}
		if err := fn(e); err != nil {
			return e.Seq, &callbackError{err}
		}
		after = e.Seq
	}
}
