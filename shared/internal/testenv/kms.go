package testenv

import (
	"context"
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
	"github.com/aws/smithy-go/middleware"
	lkmsconfig "github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
	"github.com/nsmithuk/local-kms/src/handler"
	"github.com/sirupsen/logrus"

	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// localKMS is the database of the process's in-process local-kms, set up
// once: local-kms keeps its configuration in package globals.
var localKMS struct {
	once sync.Once
	db   *data.Database
	err  error
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

// quietKMSLogger replaces local-kms's package logger, which is unexported
// and writes every request to stderr.
var quietKMSLogger = func() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}()

// KMS serves local-kms in process on 127.0.0.1 for one test, creates a
// fresh symmetric key and returns a sealer on it, a client of the server
// (for more keys) and stop, which takes the key service down (it is also
// stopped at cleanup). The server mirrors lkms.HandleRequest (method, path
// and content-type checks, X-Amz-Target dispatch) for the operations a
// sealer uses, but with a silent logger.
func KMS(t testing.TB) (sealer *seal.KMS, client *kms.Client, stop func()) {
	t.Helper()
	db := kmsDatabase(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" || r.Method != http.MethodPost || !strings.Contains(r.Header.Get("Content-Type"), "json") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		h := handler.NewRequestHandler(r, quietKMSLogger, db)
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
	client = KMSClient(srv.URL)
	out, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{Description: aws.String("fluidbox test")})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return seal.NewKMS(client, aws.ToString(out.KeyMetadata.KeyId)), client, srv.Close
}

// KMSClient is a KMS client of the server at url that fails fast: one
// attempt, a two-second timeout.
func KMSClient(url string) *kms.Client {
	return kms.New(kms.Options{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint:     aws.String(url),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Timeout: 2 * time.Second},
		APIOptions:       []func(*middleware.Stack) error{store.BodyWithoutWriteTo},
	})
}
