package seal_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/seal"
)

func TestKMSConformance(t *testing.T) {
	t.Parallel()
	s, _, _ := testenv.KMS(t)
	testSealer(t, s)
}

func TestKMSForeignKeyRefused(t *testing.T) {
	t.Parallel()
	s, client, _ := testenv.KMS(t)
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
	s, _, stopKMS := testenv.KMS(t)
	sc := seal.Context{ConnectionID: "con_1", Generation: 1}
	sealed, err := s.Seal(context.Background(), []byte("canary-kms-down"), sc)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	stopKMS()

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
	s := seal.NewKMS(testenv.KMSClient(srv.URL), "key")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.Open(ctx, []byte("sealed"), seal.Context{ConnectionID: "con_1", Generation: 1})
	if !errors.Is(err, seal.ErrUnavailable) {
		t.Fatalf("Open against a hanging KMS = %v, want ErrUnavailable", err)
	}
}

func TestKMSOversizedPlaintextNotSent(t *testing.T) {
	t.Parallel()
	s, _, _ := testenv.KMS(t)
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
	s, _, _ := testenv.KMS(b)
	benchSealOpen(b, s)
}
