package seal_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	lkmsconfig "github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
	"github.com/nsmithuk/local-kms/src/handler"
	"github.com/sirupsen/logrus"

	"github.com/fluidbox/fluidbox/shared/seal"
)

// localKMS is one in-process local-kms shared by the package's tests. Its configuration
// lives in package globals of local-kms, so it is set up once, before any test runs.
var localKMS struct {
	once sync.Once
	db   *data.Database
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if localKMS.db != nil {
		localKMS.db.Close()
	}
	os.Exit(code)
}

func kmsDatabase(t testing.TB) *data.Database {
	t.Helper()
	localKMS.once.Do(func() {
		dir, err := os.MkdirTemp("", "fluidbox-local-kms-*")
		if err != nil {
			localKMS.err = err
			return
		}
		lkmsconfig.DatabasePath = dir
		lkmsconfig.AWSRegion = "eu-west-1"
		lkmsconfig.AWSAccountId = "111122223333"
		localKMS.db = data.NewDatabase(dir)
	})
	if localKMS.err != nil {
		t.Fatalf("local-kms database: %v", localKMS.err)
	}
	return localKMS.db
}

// quietLogger replaces local-kms's package logger, which is unexported and writes every
// request to stderr.
var quietLogger = func() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}()

// newKMSServer serves local-kms on 127.0.0.1. It mirrors lkms.HandleRequest (method, path
// and content-type checks, X-Amz-Target dispatch) for the operations these tests use, but
// with a silent logger; lkms.HandleRequest itself logs through a logger nobody can reach.
func newKMSServer(t testing.TB) *httptest.Server {
	db := kmsDatabase(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" || r.Method != http.MethodPost || !strings.Contains(r.Header.Get("Content-Type"), "json") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		h := handler.NewRequestHandler(r, quietLogger, db)
		var resp handler.Response
		switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.") {
		case "CreateKey":
			resp = h.CreateKey()
		case "Encrypt":
			resp = h.Encrypt()
		case "Decrypt":
			resp = h.Decrypt()
		default:
			http.Error(w, "not implemented", http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(resp.Code)
		_, _ = io.WriteString(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newKMSClient(url string) *kms.Client {
	return kms.New(kms.Options{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint:     aws.String(url),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Timeout: 2 * time.Second},
	})
}

// newKMSSealer starts local-kms, creates a fresh symmetric key and returns a sealer on it.
func newKMSSealer(t testing.TB) (*seal.KMS, *httptest.Server, *kms.Client) {
	t.Helper()
	srv := newKMSServer(t)
	client := newKMSClient(srv.URL)
	out, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{Description: aws.String("fluidbox test")})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return seal.NewKMS(client, aws.ToString(out.KeyMetadata.KeyId)), srv, client
}

func TestKMSConformance(t *testing.T) {
	t.Parallel()
	s, _, _ := newKMSSealer(t)
	testSealer(t, s)
}

func TestKMSForeignKeyRefused(t *testing.T) {
	t.Parallel()
	s, _, client := newKMSSealer(t)
	other, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	otherSealer := seal.NewKMS(client, aws.ToString(other.KeyMetadata.KeyId))
	sc := seal.Context{ConnectionID: "con_1", Generation: 1}
	sealed, err := otherSealer.Seal(context.Background(), []byte("x"), sc)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if _, err := s.Open(context.Background(), sealed, sc); err == nil {
		t.Fatalf("Open of a value sealed under another key succeeded")
	}
}

func TestKMSUnavailable(t *testing.T) {
	t.Parallel()
	s, srv, _ := newKMSSealer(t)
	sc := seal.Context{ConnectionID: "con_1", Generation: 1}
	sealed, err := s.Seal(context.Background(), []byte("canary-kms-down"), sc)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Open(ctx, sealed, sc)
	if !errors.Is(err, seal.ErrUnavailable) {
		t.Fatalf("Open with KMS down = %v, want ErrUnavailable", err)
	}
	if errors.Is(err, seal.ErrContextMismatch) {
		t.Errorf("Open with KMS down is also ErrContextMismatch: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Open with KMS down took %v; want a quick failure", d)
	}
	var kerr *seal.KMSError
	if !errors.As(err, &kerr) || kerr.Op != "Decrypt" {
		t.Errorf("Open error %v is not a *KMSError for Decrypt", err)
	}
	if _, err := s.Seal(ctx, []byte("canary-kms-down"), sc); !errors.Is(err, seal.ErrUnavailable) {
		t.Errorf("Seal with KMS down = %v, want ErrUnavailable", err)
	} else if strings.Contains(err.Error(), "canary") {
		t.Errorf("Seal error leaks plaintext: %v", err)
	}
}

func TestKMSDeadline(t *testing.T) {
	t.Parallel()
	// A KMS that accepts the connection and never answers: the caller's deadline bounds it.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); srv.Close() })
	s := seal.NewKMS(newKMSClient(srv.URL), "key")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.Open(ctx, []byte("sealed"), seal.Context{ConnectionID: "con_1", Generation: 1})
	if !errors.Is(err, seal.ErrUnavailable) {
		t.Fatalf("Open against a hanging KMS = %v, want ErrUnavailable", err)
	}
}

func TestKMSOversizedPlaintextNotSent(t *testing.T) {
	t.Parallel()
	s, _, _ := newKMSSealer(t)
	big := strings.Repeat("canary-oversized-", 300) // > 4096 bytes
	_, err := s.Seal(context.Background(), []byte(big), seal.Context{ConnectionID: "con_1", Generation: 1})
	if !errors.Is(err, seal.ErrTooLarge) {
		t.Fatalf("Seal(%d bytes) = %v, want ErrTooLarge", len(big), err)
	}
	if strings.Contains(fmt.Sprint(err), "canary") {
		t.Errorf("Seal error leaks plaintext: %v", err)
	}
}

func BenchmarkKMSSealOpen(b *testing.B) {
	s, _, _ := newKMSSealer(b)
	ctx := context.Background()
	sc := seal.Context{ConnectionID: "con_bench", Generation: 1}
	cred := seal.Credential{Type: seal.TypeBearer, Token: "bench-token"}
	for b.Loop() {
		sealed, err := seal.SealCredential(ctx, s, cred, sc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := seal.OpenCredential(ctx, s, sealed, sc); err != nil {
			b.Fatal(err)
		}
	}
}
