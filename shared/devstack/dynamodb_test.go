package devstack

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/store"
)

// TestAnswerBeforeTheWriteEnds: the emulator answers a request as soon as
// it has read its body, and on a busy machine the client's writing
// goroutine may not run again until the SDK has the answer and has closed
// the request's body. The client must still read the whole answer. The
// test holds the writing goroutine in its last write of a GetItem until
// the SDK starts reading the answer, and gives it a moment to do whatever
// it does with the closed body; without the body wrapper every fluidbox
// client has (store.RetryConflicts, bodyWithoutWriteTo) the transport then
// closes the connection under the answer, and the GetItem fails as
// TestUpdateOverItemLimit's requests did
// in 1 run of 100: a 200 whose body cannot be read, "use of closed network
// connection". The answer, a 64 KB item, is larger than what the client
// has read of it by then (its 4 KB buffer), so it reads from the socket.
func TestAnswerBeforeTheWriteEnds(t *testing.T) {
	db, err := StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	trap := newWriteTrap()
	client := DynamoClient(db.URL, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.HTTPClient = trap
	})
	ctx := context.Background()
	if err := store.New(client, "t").CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}, "sk": &types.AttributeValueMemberS{Value: "b"}}
	item := map[string]types.AttributeValue{"d": &types.AttributeValueMemberS{Value: strings.Repeat("x", 64<<10)}}
	for k, v := range key {
		item[k] = v
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item}); err != nil {
		t.Fatal(err)
	}
	trap.arm()
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key, ConsistentRead: aws.Bool(true)})
	if !trap.sprung() {
		t.Fatal("the trap did not hold the GetItem's body")
	}
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := got.Item["d"].(*types.AttributeValueMemberS); !ok || len(d.Value) != 64<<10 {
		t.Fatal("the item came back without its 64 KB")
	}
}

// writeTrap is an HTTP client whose connections, once armed, hold the
// next write that does not start a request (a body's) after it has
// reached the socket, until the caller starts reading the answer; that
// read waits up to closeWait for the connection to be closed under it
// before it reads.
type writeTrap struct {
	hc    *http.Client
	armed atomic.Bool

	mu      sync.Mutex
	held    bool
	release chan struct{} // closed when the answer's first read begins
	closed  chan struct{} // closed when a connection is closed
}

// closeWait is how long the answer's first read gives the released write
// to close the connection: the wrong path takes microseconds.
const closeWait = 200 * time.Millisecond

func newWriteTrap() *writeTrap {
	w := &writeTrap{}
	var d net.Dialer
	w.hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &trappedConn{Conn: c, trap: w}, nil
	}}}
	return w
}

func (w *writeTrap) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held, w.release, w.closed = false, make(chan struct{}), make(chan struct{})
	w.armed.Store(true)
}

func (w *writeTrap) sprung() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// Do sends r; the answer to a request whose body write is held releases
// it when its body is first read.
func (w *writeTrap) Do(r *http.Request) (*http.Response, error) {
	resp, err := w.hc.Do(r)
	w.mu.Lock()
	held, release, closed := w.held, w.release, w.closed
	w.mu.Unlock()
	if err != nil || !held {
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release, closed: closed}
	return resp, nil
}

type releasingBody struct {
	io.ReadCloser
	release, closed chan struct{}
	once            sync.Once
}

func (b *releasingBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		close(b.release)
		select {
		case <-b.closed:
		case <-time.After(closeWait):
		}
	})
	return b.ReadCloser.Read(p)
}

type trappedConn struct {
	net.Conn
	trap *writeTrap
}

func (c *trappedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	w := c.trap
	if err == nil && !bytes.HasPrefix(p, []byte("POST ")) && w.armed.CompareAndSwap(true, false) {
		w.mu.Lock()
		w.held = true
		release := w.release
		w.mu.Unlock()
		<-release
	}
	return n, err
}

func (c *trappedConn) Close() error {
	w := c.trap
	w.mu.Lock()
	if w.closed != nil {
		select {
		case <-w.closed:
		default:
			close(w.closed)
		}
	}
	w.mu.Unlock()
	return c.Conn.Close()
}
